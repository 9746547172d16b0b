"""Issue 18: what the UI shows a researcher, as metadata values.

Tables are Dagster table metadata (shown inline, whatever their size), numbers rounded to two
decimals with their 95% intervals beside them, the best per column marked; an eval report
leads with pass@1, pass@k and Δ to the base model as plain numbers; an adapter states the
configuration it was trained with; the training log is a table, thinned, not a JSON dump.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict
from types import SimpleNamespace

import dagster as dg
import polars as pl
import pytest

from assets._metadata import frame_table, text_table
from assets.adapters import LOG_ROWS, training_log_table
from assets.eval_reports import science_metadata
from assets.result_tables import headline, metric_tables, table_metadata
from saturated_dag.result_tables import display_rows, results_table, sweep_table, to_markdown
from saturated_dag.training.config import (
    DpoSettings,
    RrhfSettings,
    SftSettings,
    settings_line,
    settings_summary,
)
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
    assert by["Base model"]["Δ pass@1"] == "+0.00"  # no interval against itself
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
        "run", "pass@8", "Δ pass@8", "Holm p (Δ pass@8)"]
    value = tables["table"]
    assert isinstance(value, dg.TableMetadataValue) and len(value.records) == 3
    assert [c.name for c in value.schema.columns] == ["run", "pass@1", "Δ pass@1",
                                                      "Holm p (Δ pass@1)"]
    assert [r.data["run"] for r in value.records] == [
        "Base model", "saturated · DPO · self-judge", "saturated · SFT"]
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
    assert out["best Δ pass@1 row"] == "saturated · DPO · self-judge"  # as the table says
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
    ("dpo", DpoSettings(beta=0.3), {"β (DPO)": 0.3, "DPO loss": "sigmoid"}, "λ (rank weight)"),
    ("rrhf", RrhfSettings(rank_weight=0.5, hinge=False),
     {"λ (rank weight)": 0.5, "σ-RRHF hinge": False, "σ-RRHF SFT term": True}, "β (DPO)"),
    ("sft", SftSettings(), {}, "β (DPO)"),
])
def test_settings_summary_names_every_setting_of_the_method(
        method: str, settings: object, present: dict, absent: str) -> None:
    summary = settings_summary(method, asdict(settings))  # type: ignore[call-overload]
    for key, value in present.items():
        assert summary[key] == value
    assert absent not in summary
    for key in ("learning rate", "batch size", "epochs (max)", "LoRA r", "LoRA α",
                "LoRA dropout", "LoRA targets", "seed"):
        assert key in summary
    assert summary["LoRA targets"] == "q_proj, k_proj, v_proj, o_proj"
    line = settings_line(method, asdict(settings))  # type: ignore[call-overload]
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
    assert {"step", "loss", "reward margin", "learning rate"} <= set(names)
    assert table.records[-1].data["learning rate"] == "1e-05"
    assert training_log_table([{"train_runtime": 1.0}]) is None


def test_frame_table_types_and_rounds() -> None:
    value = frame_table(pl.DataFrame({"x": [1.23456, None], "n": [1, 2], "s": ["a", None],
                                      "b": [True, False]}))
    assert [c.type for c in value.schema.columns] == ["float", "int", "string", "bool"]
    assert value.records[0].data == {"x": 1.23, "n": 1, "s": "a", "b": True}
    assert value.records[1].data["x"] is None
    assert text_table(["a"], [[None]]).records[0].data == {"a": ""}


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
