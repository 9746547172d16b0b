"""Issue 18: what the UI shows a researcher, as metadata values.

Tables are Dagster table metadata (shown inline, whatever their size), numbers rounded to two
decimals with their 95% intervals beside them, the best per column marked; an eval report
leads with pass@1, pass@k and Δ to the base model as plain numbers; an adapter states the
configuration it was trained with; the training log is a table, thinned, not a JSON dump.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import polars as pl
import pytest

from assets._metadata import frame_table, summary_entry, text_table
from assets.adapters import LOG_ROWS, training_log_table
from assets.eval_reports import science_metadata
from assets.result_tables import headline, metric_tables, table_metadata
from saturated_dag.config import TrainingSettings
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.reporting.result_tables import (
    SUMMARY_CHARS,
    display_rows,
    results_table,
    sweep_table,
    to_markdown,
)
from saturated_dag.training.config import settings_line, settings_record, settings_summary
from saturated_dag.training.train import PROGRESS_LINES, _Progress


def _counts(correct: list[int], cells: list[str] | None = None, n: int = 8) -> pl.DataFrame:
    """A per-question table (one eval replicate, one training replicate)."""
    cells = cells or ["3x1"] * len(correct)
    return pl.DataFrame({"question_id": [f"q{i}" for i in range(len(correct))],
                         "cell": cells, "replicate": [0] * len(correct),
                         "training_replicate": [0] * len(correct),
                         "n": [n] * len(correct), "correct": correct})


BASE = _counts([8, 0, 4, 2, 6, 1, 8, 3], ["3x1"] * 4 + ["4x1"] * 4)
BETTER = _counts([8, 2, 6, 4, 8, 3, 8, 5], ["3x1"] * 4 + ["4x1"] * 4)
WORSE = _counts([6, 0, 2, 1, 4, 0, 7, 2], ["3x1"] * 4 + ["4x1"] * 4)


def _table() -> pl.DataFrame:
    return results_table(BASE, {("saturated", "dpo", "self_judge"): BETTER,
                                ("saturated", "sft", None): WORSE}, k=8, eval_set="toy")


def test_display_rows_round_mark_the_best_and_keep_intervals() -> None:
    headers, rows = display_rows(_table())
    assert headers[:3] == ["split", "method", "scorer"] and "eval_set" not in headers
    by = {row[1]: dict(zip(headers, row, strict=True)) for row in rows}
    assert re.fullmatch(r"\d+\.\d\d ★ \[\d+\.\d\d, \d+\.\d\d\]", by["DPO"]["pass@1"]), by
    assert by["DPO"]["pass@1"].startswith(f"{_table()['pass@1'][1]:.2f} ★")  # best, marked
    assert "★" not in by["SFT"]["pass@1"] and "★" not in by["Base model"]["pass@1"]
    assert by["Base model"]["Δ pass@1"] == "—"  # 0 against itself by construction
    assert re.fullmatch(r"[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\]\*?†?",
                        by["SFT"]["Δ pass@1"]), by["SFT"]
    assert re.fullmatch(r"<0\.001|[01]\.\d\d\d", by["SFT"]["Holm p (Δ pass@1)"]), by["SFT"]
    assert by["Base model"]["Holm p (Δ pass@1)"] == ""  # the base row tests nothing
    # the Markdown file is the same rows, the best in bold instead
    assert f"**{_table()['pass@1'][1]:.2f}**" in to_markdown(_table())


def test_table_metadata_is_an_inline_table_with_described_columns() -> None:
    tables = metric_tables(_table())
    assert list(tables) == ["table", "pass@8 table"]  # one metric each: the UI gives ~500 px
    assert [c.name for c in tables["pass@8 table"].schema.columns] == [
        "run", "pass@8", "Δ pass@8", "Holm p"]
    value = tables["table"]
    assert isinstance(value, dg.TableMetadataValue) and len(value.records) == 3
    assert [c.name for c in value.schema.columns] == ["run", "pass@1", "Δ pass@1",
                                                      "Holm p"]
    assert [r.data["run"] for r in value.records] == [
        "Base model", "saturated · DPO · self_judge", "saturated · SFT"]
    columns = {c.name: c for c in value.schema.columns}
    assert "interval" in (columns["pass@1"].description or "")
    assert "excludes 0" in (columns["Δ pass@1"].description or "")


def test_a_sweeps_table_keeps_its_best_epoch() -> None:
    frame = sweep_table(BASE, "hard", [("λ=0", {"lambda": 0.0, "epochs": 2, "adapter": "a"},
                                        BETTER)], k=8)
    value = table_metadata(frame)
    assert [c.name for c in value.schema.columns][:3] == ["run", "epochs", "pass@1"]
    assert value.records[1].data["run"] == "hard · λ=0" and value.records[1].data["epochs"] == "2"


def test_headline_numbers_are_plain_rounded_floats() -> None:
    frame = _table()
    out = headline(frame)
    assert out["base pass@1"] == round(frame["pass@1"][0], 2)
    best = int(frame.slice(1)["Δ pass@1"].arg_max() or 0) + 1
    assert out["best Δ pass@1"] == round(frame["Δ pass@1"][best], 2)
    assert out["best Δ pass@1 low"] <= out["best Δ pass@1"] <= out["best Δ pass@1 high"]
    assert out["best Δ pass@1 row"] == "saturated · DPO · self_judge"  # as the table says
    assert isinstance(out["rows whose Δ pass@1 excludes 0"], int)
    assert all(isinstance(v, float) for k, v in out.items() if "pass@1" in k and "row" not in k)


def test_an_adapter_eval_report_leads_with_pass_at_k_and_its_delta() -> None:
    out = science_metadata(BETTER, BASE, 8, "toy")
    frame = results_table(BASE, {("s", "m", None): BETTER}, k=8)
    for metric in ("pass@1", "pass@8", "Δ pass@1", "Δ pass@8"):
        assert out[metric] == round(frame[metric][1], 2)
        assert out[f"{metric} low"] <= out[metric] <= out[f"{metric} high"]
    assert out["base pass@1"] == round(frame["pass@1"][0], 2)
    assert math.isclose(out["Δ pass@1"], out["pass@1"] - out["base pass@1"], abs_tol=0.011)
    assert out["questions"] == 8 and "Eval set: toy" in out["about the intervals"].value
    cells = out["by cell"]
    assert [c.name for c in cells.schema.columns] == ["cell", "base pass@1", "pass@1", "Δ pass@1"]
    assert [r.data["cell"] for r in cells.records] == ["3x1", "4x1"]
    part = results_table(BASE.filter(pl.col("cell") == "3x1"),
                         {("s", "m", None): BETTER.filter(pl.col("cell") == "3x1")}, k=8)
    assert cells.records[0].data["pass@1"].startswith(f"{part['pass@1'][1]:.2f} [")
    assert cells.records[0].data["base pass@1"] == f"{part['pass@1'][0]:.2f}"


def test_the_base_models_report_has_no_delta() -> None:
    out = science_metadata(BASE, None, 8, "toy")
    assert {"pass@1", "pass@1 low", "pass@1 high", "pass@8"} <= set(out)
    assert not any(key.startswith("Δ") or key == "base pass@1" for key in out)
    assert [c.name for c in out["by cell"].schema.columns] == ["cell", "pass@1", "pass@8"]


@pytest.mark.parametrize(("method", "settings", "present", "absent"), [
    ("dpo", TrainingSettings(dpo_beta=0.3), {"β (DPO)": 0.3, "DPO loss": "sigmoid"},
     "λ (rank weight)"),
    ("rrhf", TrainingSettings(rrhf_rank_weight=0.5, rrhf_hinge=False),
     {"λ (rank weight)": 0.5, "σ-RRHF hinge": False, "σ-RRHF SFT term": True}, "β (DPO)"),
    ("sft", TrainingSettings(), {}, "β (DPO)"),
])
def test_settings_summary_names_every_setting_of_the_method(
        method: str, settings: TrainingSettings, present: dict, absent: str) -> None:
    summary = settings_summary(method, settings_record(method, settings))
    for key, value in present.items():
        assert summary[key] == value
    assert absent not in summary
    for key in ("learning rate", "batch size", "epochs (max)", "LoRA r", "LoRA α",
                "LoRA dropout", "LoRA targets", "seed"):
        assert key in summary
    assert summary["LoRA targets"] == "q_proj, k_proj, v_proj, o_proj"
    line = settings_line(method, settings_record(method, settings))
    assert line.startswith(f"{method} · learning rate 1e-05")


def test_training_log_table_is_thinned_and_keeps_the_last_step() -> None:
    history = [{"step": s, "epoch": s / 50, "loss": 1 / s, "rewards/margins": s / 100,
                "learning_rate": 1e-5} for s in range(1, 101)]
    history.append({"train_runtime": 3.0, "step": 100})  # the trainer's summary: no loss
    table = training_log_table(history)
    assert table is not None
    steps = [r.data["step"] for r in table.records]
    assert len(steps) <= LOG_ROWS + 1 and steps[0] == 1 and steps[-1] == 100
    assert steps == sorted(steps)
    names = [c.name for c in table.schema.columns]
    # short headers (the UI wraps none): a DPO log's six columns fit the panel at 1,440 px
    assert {"step", "loss", "rew. margin", "η"} <= set(names)
    assert table.records[-1].data["η"] == "1e-5"  # as η is written
    assert training_log_table([{"train_runtime": 1.0}]) is None
    decay = training_log_table([{"step": i, "loss": 1.0, "learning_rate": lr}
                                for i, lr in enumerate((0.0, 3e-4, 2.85e-4, 5.65e-5), 1)])
    assert decay is not None  # one notation down a column, never 0.000285 beside 5.65e-05
    assert [r.data["η"] for r in decay.records] == ["0", "3e-4", "2.85e-4", "5.65e-5"]


def test_frame_table_types_and_writes_every_float_with_the_same_decimals() -> None:
    value = frame_table(pl.DataFrame({"x": [1.23456, None], "n": [1, 2], "s": ["a", None],
                                      "b": [True, False]}))
    assert [c.type for c in value.schema.columns] == ["float", "int", "string", "bool"]
    assert value.records[0].data == {"x": "1.23", "n": 1, "s": "a", "b": True}
    assert value.records[1].data["x"] is None
    assert text_table(["a"], [[None]]).records[0].data == {"a": ""}
    # the UI would print 91.8 and 2 beside 0.86: as text every one keeps two decimals
    floats = frame_table(pl.DataFrame({"%": [91.8, 2.0, float("nan")], "ρ": [0.858, 1.0, 0.5]}))
    assert [r.data["%"] for r in floats.records] == ["91.80", "2.00", "n/a"]
    assert [r.data["ρ"] for r in floats.records] == ["0.86", "1.00", "0.50"]


def test_frame_table_formats_a_column_by_its_own_spec() -> None:
    value = frame_table(pl.DataFrame({"learning rate": [2e-05, 5e-06, 1e-2], "x": [0.5] * 3}),
                        formats={"learning rate": "g", "x": lambda v: f"{v:+.1f}"})
    assert [r.data["learning rate"] for r in value.records] == ["2e-05", "5e-06", "0.01"]
    assert value.records[0].data["x"] == "+0.5"
    assert [c.type for c in value.schema.columns] == ["float", "float"]  # the values' type


def test_a_long_summary_is_cut_at_a_paragraph_so_its_answer_shows_inline() -> None:
    short = summary_entry("**3 of 3 rows below**")
    assert short.value == "**3 of 3 rows below**"
    long = summary_entry("\n\n".join(["**answer**", "x" * 500, "y" * 600]))
    assert len(long.value) < SUMMARY_CHARS and long.value.startswith("**answer**")
    assert "x" * 500 in long.value and "y" not in long.value and long.value.endswith("…")


def test_progress_logs_loss_every_few_steps() -> None:
    lines: list[str] = []
    progress = _Progress(lines.append)
    total = 3 * PROGRESS_LINES + 1
    for step in range(1, total + 1):
        state = SimpleNamespace(global_step=step, max_steps=total, epoch=step / total)
        logs = {"loss": 0.5, "rewards/margins": 0.25}
        progress.on_log(None, state, None, logs=logs)
        progress.on_log(None, state, None, logs={"train_runtime": 1.0})  # not a loss line
    assert PROGRESS_LINES <= len(lines) <= PROGRESS_LINES + 2
    assert lines[-1].startswith(f"step {total}/{total}")  # the last step always
    assert "loss 0.5000, reward margin 0.2500" in lines[0]


def test_report_assets_lead_with_their_summary_then_the_figure(tmp_path: Path) -> None:
    """The results table, a sweep and the behaviour table, materialised on seeded eval
    reports: ``summary`` is the first metadata entry and the figure the second (one line in
    the UI: both on the page's first screen), the tables after them, the SVG on disk."""
    from tests.pipeline import graph, resources
    from tests.scoring_data import eval_report

    overrides = {
        "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                      "strict_grid": None, "eval_questions_per_cell": 3},
        "sampling": {"n": 2, "max_new_tokens": 6},
        "training": {"splits": ["saturated"], "scorers": ["entropy"], "methods": ["rrhf"],
                     "isolate": False, "selection": {"learning_rates": None},
                     "sweeps": {"rank_weight": {"split": "saturated", "scorer": "entropy",
                                                "values": [0.0, 1.0]},
                                "rrhf_variants": None, "dpo_beta": None}}}
    everything, _ = graph("demo", overrides)
    out = tmp_path / "out"
    names = ("results_table", "rank_weight_ablation", "behaviour")
    tables = [a.key for a in everything if a.key.path[0] == "chain_sum"
              and a.key.path[-1] in names]
    reports = [a.key.path for a in everything
               if a.key.path[0] == "chain_sum" and "eval" in a.key.path]
    for i, key in enumerate(reports):
        report = eval_report({q: (2, (i + j) % 3) for j, q in enumerate(["q1", "q2", "q3"])},
                             cell="2x1")
        atomic_write_parquet(report, out.joinpath("assets", *key[:-1]) / f"{key[-1]}.parquet")
    result = dg.materialize(everything, selection=tables,
                            resources=resources(out, "demo", overrides))
    events = {e.asset_key.path[-1]: e.materialization.metadata
              for e in result.get_asset_materialization_events()}
    assert set(events) == set(names)
    for name, metadata in events.items():
        keys = [k for k in metadata if k != "forest plot"]  # tables with Δ intervals only
        assert keys[:3] == ["summary", "figure", "table"], (name, keys)
        if name != "behaviour":  # the inline forest plot comes second, before the figure
            assert list(metadata)[:3] == ["summary", "forest plot", "figure"], (name, keys)
            bars = [list(r.data.values())[1] for r in metadata["forest plot"].value.records]
            assert bars and all("●" in bar for bar in bars), bars
        assert "below the base model" in metadata["summary"].value, name
        assert len(metadata["summary"].value) < SUMMARY_CHARS
        assert metadata["figure"].value.startswith("![")
        svg = out / metadata["figure (SVG)"].value  # in the output folder
        assert svg.suffix == ".svg" and svg.with_suffix(".png").is_file(), name
    assert "Sample: 3 eval questions × 2 samples" in events["results_table"]["summary"].value


def test_behaviour_inline_table_shows_no_delta_on_the_base_models_rows() -> None:
    from assets.behaviour import shown
    from saturated_dag.analysis.behaviour import BASE as BASE_ROW
    from saturated_dag.analysis.behaviour import behaviour_table
    from tests.scoring_data import eval_report

    base = eval_report({f"q{i}": (4, 1) for i in range(6)}, cell="3x1")
    run = eval_report({f"q{i}": (4, 3) for i in range(6)}, cell="3x1")
    table = shown(behaviour_table(base, {"saturated/sft": run}))
    rows = {r["adapter"]: r for r in table.iter_rows(named=True)}
    assert rows[BASE_ROW]["Δ pass@1"] == rows[BASE_ROW]["Δ tokens"] == "—"
    assert re.fullmatch(r"\+50\.00 \[\+50\.00, \+50\.00\]", rows["saturated / sft"]["Δ pass@1"])
    assert table.columns == ["adapter", "cell", "Δ pass@1", "Δ tokens"]  # the rest: the CSV


def _selection() -> pl.DataFrame:
    from saturated_dag.training.selection import Trained, selection_table

    settings = {"learning_rate": 2e-05, "epochs": 2, "batch_size": 8, "dpo_beta": 0.1,
                "rrhf_rank_weight": 0.1}
    return selection_table([
        Trained("dpo_self_judge", settings, [0.50, 0.40], [1, 2],
                configuration="beta0.1_lr2e-05"),
        Trained("dpo_self_judge_beta2", {**settings, "dpo_beta": 2.0}, [0.55, 0.52], [2, 2],
                configuration="beta2_lr2e-05"),
        Trained("dpo_self_judge_lr5e-06", {**settings, "learning_rate": 5e-06}, [0.2, 0.3],
                [1, 1], configuration="beta0.1_lr5e-06")])


def test_selection_table_inline_is_narrow_and_writes_learning_rates_in_full() -> None:
    from assets.selection import shown

    value = shown(_selection())
    names = [c.name for c in value.schema.columns]
    # the settings that differ, the learning rate always; max epochs, batch size and λ are
    # the same on every configuration, so they are left to the Parquet
    # (seeds, kept epochs and the rule's margins too: short headers, for the 1440 px panel)
    assert names == ["configuration", "η", "β", "val. pass@1", "chosen"]
    rows = [r.data for r in value.records]
    # each configuration by its key, as its adapters' partitions name it (beta0.1_lr2e-05_seed0)
    assert [r["configuration"] for r in rows] == ["beta0.1_lr2e-05", "beta2_lr2e-05",
                                                  "beta0.1_lr5e-06"]
    assert [r["η"] for r in rows] == ["2e-5", "2e-5", "5e-6"]  # never 0
    assert [r["val. pass@1"] for r in rows] == ["45.00", "53.50", "25.00"]
    assert [r["chosen"] for r in rows] == ["", "✓", ""]
