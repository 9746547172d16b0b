"""Issue 33, item 3: one runs table per task, one row per trained adapter.

A small hand-built world: DPO and SFT on the saturated split, each selecting between two
learning rates over two training seeds, and a Table 9 row (β = 0.1, η = 1e-3) that pins the
profile's own learning rate, so it trains the main cell's ``dpo_entropy`` adapters again
(one adapter, two cells). The main DPO cell's selection chooses η = 3e-4.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from saturated_dag.experiments import Experiment, experiment_plan
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.labels import scientific
from saturated_dag.reporting.runs_table import (
    COMPACT,
    by_split,
    chosen_configurations,
    compact,
    configurations,
    inline_tables,
    read_record,
    runs_table,
    summary,
    task_adapters,
    variant,
)
from saturated_dag.schemas import check_frame, schema
from saturated_dag.training.config import settings_record
from saturated_dag.training.selection import Trained, selection_table
from tests.pipeline import asset_path, by_name, graph, resources
from tests.scoring_data import eval_report

OVERRIDES = {
    "sampling": {"n": 2},
    "training": {"splits": ["saturated"], "methods": ["dpo", "sft"], "scorers": ["entropy"],
                 "learning_rate": 1e-3, "dpo_beta": 0.1, "replicates": 2,
                 "selection": {"learning_rates": [1e-3, 3e-4], "dpo_betas": None},
                 "sweeps": {"rank_weight": None, "rrhf_variants": None,
                            "dpo_beta": {"split": "saturated", "scorer": "entropy",
                                         "betas": [0.1], "learning_rates": [1e-3]}}},
}
TASK = "chain_sum"
BASE = {"q0": (2, 1), "q1": (2, 1), "q2": (2, 0), "q3": (2, 2)}  # pass@1 50%
ALL_RIGHT = {q: (2, 2) for q in BASE}  # pass@1 100%
HALF = dict(BASE)
ADAPTERS = {"dpo_entropy", "dpo_entropy_seed1", "dpo_entropy_lr0.0003",
            "dpo_entropy_lr0.0003_seed1", "sft", "sft_seed1", "sft_lr0.0003",
            "sft_lr0.0003_seed1"}


def _profile():
    return load_profile("demo", OVERRIDES)


def _per_question(counts: dict[str, tuple[int, int]], replicate: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"question_id": list(counts), "cell": ["3x1"] * len(counts),
                         "training_replicate": [replicate] * len(counts),
                         "replicate": [0] * len(counts),
                         "n": [n for n, _ in counts.values()],
                         "correct": [c for _, c in counts.values()]})


def _report(*seeds: dict[str, tuple[int, int]]) -> pl.DataFrame:
    return pl.concat([_per_question(counts, r) for r, counts in enumerate(seeds)])


def _write_record(folder: Path, exp: Experiment, profile, best: int, val: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    settings = settings_record(exp.method, exp.training(profile.training))
    (folder / "training_config.json").write_text(json.dumps({
        "method": exp.method, "best_epoch": best, "precision": "float32", "settings": settings,
        "epochs": [{"epoch": 1, "step": 1, "val_pass@1": 0.25},
                   {"epoch": 2, "step": 2, "val_pass@1": val}]}))


def _frame(tmp_path: Path) -> pl.DataFrame:
    profile = _profile()
    adapters = task_adapters(experiment_plan(profile)[TASK])
    folders = {a.adapter: tmp_path / a.adapter.name for a in adapters}
    for a in adapters:
        if a.adapter.name != "sft_seed1":  # one adapter not trained yet
            _write_record(folders[a.adapter], a.adapter, profile, 2, 0.75)
    chosen = chosen_configurations(experiment_plan(profile)[TASK], adapters, {
        "saturated/dpo_entropy": "dpo_entropy_lr0.0003", "saturated/sft": "sft"})
    reports = {"saturated/dpo_entropy": _report(ALL_RIGHT, HALF),
               "saturated/dpo_entropy_lr0.001": _report(HALF, HALF),
               "saturated/sft": _report(HALF, ALL_RIGHT)}
    return runs_table(profile, TASK, adapters,
                      {exp: read_record(folder) for exp, folder in folders.items()},
                      {exp: str(folder) for exp, folder in folders.items()}, chosen,
                      reports, _per_question(BASE), "toy eval set")


def test_each_row_reads_its_own_splits_adapter_on_the_demo_profile(tmp_path: Path) -> None:
    """The demo trains adapters of one name on several splits (``dpo_self_judge`` on
    saturated and strict_saturated): each row's record and folder are its own split's, not
    the last same-named adapter's (30 of the demo's 78 rows were another split's)."""
    profile = load_profile("demo")
    adapters = task_adapters(experiment_plan(profile)["chain_sum"])
    validation = {"saturated": 0.125, "strict_saturated": 0.25, "hard": 0.5}
    folders = {a.adapter: tmp_path / a.adapter.split / a.adapter.name for a in adapters}
    for exp, folder in folders.items():
        _write_record(folder, exp, profile, 2, validation[exp.split])
    names = [a.adapter.name for a in adapters]
    assert len(set(names)) < len(names)  # the case this test is about
    frame = runs_table(profile, "chain_sum", adapters,
                       {exp: read_record(folder) for exp, folder in folders.items()},
                       {exp: str(folder) for exp, folder in folders.items()}, {}, {}, None)
    for row in frame.iter_rows(named=True):
        assert f"/{row['split']}/" in row["adapter_path"], row
        assert row["validation pass@1"] == 100 * validation[row["split"]], row


def test_enumerates_every_configuration_and_seed_once() -> None:
    adapters = task_adapters(experiment_plan(_profile())[TASK])
    assert {a.adapter.name for a in adapters} == ADAPTERS and len(adapters) == len(ADAPTERS)
    shared = next(a for a in adapters if a.adapter.name == "dpo_entropy_seed1")
    assert [c.name for c in shared.cells] == ["dpo_entropy", "dpo_entropy_lr0.001"]
    assert shared.replicate == 1 and shared.configuration.name == "dpo_entropy"


def test_rows_settings_choice_and_eval(tmp_path: Path) -> None:
    frame = _frame(tmp_path)
    check_frame(frame, "runs_table")
    assert frame.columns == list(schema("runs_table", k=2))
    assert frame.height == len(ADAPTERS) and set(frame["adapter"]) == ADAPTERS
    rows = {r["adapter"]: r for r in frame.iter_rows(named=True)}

    won = rows["dpo_entropy_lr0.0003"]  # chosen by the main cell's selection, seed 0
    assert won["chosen"] and won["eval report"] == "saturated/dpo_entropy"
    assert (won["split"], won["method"], won["scorer"]) == ("saturated", "dpo", "entropy")
    assert won["configuration"] == "dpo_entropy_lr0.0003" and won["task"] == TASK
    assert won["learning_rate"] == 3e-4 and won["dpo_beta"] == 0.1 and won["seed"] == 0
    assert won["pass@1"] == pytest.approx(100.0) and won["Δ pass@1"] == pytest.approx(50.0)
    assert won["Δ pass@1 low"] <= won["Δ pass@1"] <= won["Δ pass@1 high"]
    assert won["pass@2"] is not None and won["questions"] == 4 and won["eval_set"]
    assert rows["dpo_entropy_lr0.0003_seed1"]["pass@1"] == pytest.approx(50.0)  # its own seed
    assert rows["dpo_entropy_lr0.0003_seed1"]["seed"] == 1

    both = rows["dpo_entropy"]  # lost the main cell, the Table 9 row's only configuration
    assert both["cells"] == "dpo_entropy, dpo_entropy_lr0.001" and both["chosen"]
    assert both["eval report"] == "saturated/dpo_entropy_lr0.001"
    assert both["learning_rate"] == 1e-3

    lost = rows["sft_lr0.0003"]
    assert not lost["chosen"] and lost["eval report"] is None
    assert lost["pass@1"] is None and lost["Δ pass@1"] is None
    assert (lost["method"], lost["scorer"]) == ("sft", None)
    assert lost["dpo_beta"] is None and lost["rrhf_rank_weight"] is None  # not SFT's settings
    assert lost["validation pass@1"] == pytest.approx(75.0) and lost["epoch kept"] == 2
    assert lost["precision"] == "float32" and lost["adapter_path"].endswith("sft_lr0.0003")
    assert rows["sft_seed1"]["pass@1"] == pytest.approx(100.0)

    untrained = rows["sft_seed1"]  # no training_config.json: planned settings, no record
    assert untrained["epoch kept"] is None and untrained["validation pass@1"] is None
    assert untrained["learning_rate"] == 1e-3 and untrained["precision"] is None
    assert int(frame["chosen"].sum()) == 6


def test_a_selection_is_needed_where_a_cell_has_several_configurations() -> None:
    profile = _profile()
    with pytest.raises(ValueError, match="saturated/sft selects among 2 configurations"):
        plan = experiment_plan(profile)[TASK]
        chosen_configurations(plan, task_adapters(plan),
                              {"saturated/dpo_entropy": "dpo_entropy"})


def test_compact_view_and_summary(tmp_path: Path) -> None:
    """Method, scorer, β, λ, η and validation pass@1 are columns (not only inside an adapter's
    name), η never breaks at its hyphen, Δ carries its interval, and the evaluated rows come
    first, by Δ."""
    frame = _frame(tmp_path)
    view = compact(frame)
    assert view.columns == list(COMPACT)
    assert view.columns[1:7] == ["method", "scorer", "β", "λ", "η", "val. pass@1"]
    assert "Δ pass@1" in view.columns and "pass@1 low" not in view.columns
    assert set(view["η"]) == {"1e\u20113", "3e\u20114"}  # a hyphen the UI does not break at
    assert [scientific(v) for v in (1.5e-5, 5e-6, 2e-3, 1e-4, None)] == [
        "1.5e-5", "5e-6", "2e-3", "1e-4", None]
    top = view.row(0, named=True)  # dpo_entropy_lr0.0003: Δ +50, the largest
    assert (top["method"], top["scorer"], top["β"], top["λ"], top["η"]) == (
        "dpo seed 0", "entropy", "0.1", None, "3e\u20114")  # 2 seeds: its seed named
    assert top["Δ pass@1"].startswith("+50.00 [")  # Δ with its interval in one cell
    assert top["split"] == "saturated"
    one_seed = compact(frame.filter(pl.col("seed") == 0))  # one seed each: no seed named
    assert set(one_seed["method"]) == {"dpo", "sft"}
    tables = by_split(view)  # one inline table per split, in the order of their best row
    assert next(iter(tables)) == "saturated" and "split" not in tables["saturated"].columns
    assert sum(t.height for t in tables.values()) == view.height
    assert frame.filter(pl.col("Δ pass@1").is_not_null())["chosen"].all()  # Δ: chosen only
    sft = view.filter(pl.col("method").str.starts_with("sft"))
    assert set(sft["scorer"]) == {"—"} and sft["β"].is_null().all()
    deltas = [float(d.split()[0]) for d in view["Δ pass@1"].drop_nulls()]
    assert deltas == sorted(deltas, reverse=True)
    assert view["Δ pass@1"].is_null().to_list() == sorted(
        view["Δ pass@1"].is_null().to_list())  # the unevaluated after
    assert compact(frame, max_rows=3).height == 3 and compact(frame, None).height == frame.height
    text = summary(frame, TASK)
    assert text.startswith(f"**{len(ADAPTERS)} adapters** of {TASK}")
    assert "6 chosen" in text and "6 with an eval report" in text
    assert "**dpo_entropy_lr0.0003** (saturated) 100.00%" in text
    assert "MLflow: off" in text
    assert "`sqlite:///x.db`" in summary(frame, TASK, "sqlite:///x.db")
    lost = view.filter(pl.col("method").str.starts_with("sft")).row(-1, named=True)
    assert lost["val. pass@1"] is not None  # validation pass@1, what the selection chose by
    assert "`runs: saturated` 3 of its 8 rows" in summary(frame, TASK,
                                                       inline={"saturated": (3, 8)})
    assert "every row, one table per split;" in summary(frame, TASK,
                                                       inline={"saturated": (8, 8)})
    inline = inline_tables(frame, max_rows=3)  # each split keeps its own rows
    assert {split: total for split, (_, total) in inline.items()} == {
        split: rows.height for split, rows in by_split(compact(frame, None)).items()}
    assert all(rows.height == min(3, total) for rows, total in inline.values())


def test_the_summary_counts_configurations_by_split_and_seed() -> None:
    """A configuration is a split and a name: the demo's 78 adapters were once summarised as
    '44 configurations x training seeds' (names repeat across splits)."""
    frame = pl.DataFrame({
        "split": ["saturated", "strict_saturated", "saturated", "saturated", "saturated"],
        "configuration": ["dpo_self_judge", "dpo_self_judge", "sft", "sft", "sft"],
        "seed": [0, 0, 0, 1, 2]})
    assert configurations(frame) == (3, {1: 2, 3: 1})
    full = _frame_like(frame)
    text = summary(full, TASK)
    assert "**5 adapters**" in text
    assert "3 configurations (split x settings; 2 with 1 training seed, 1 with 3 training seeds)" \
        in text


def _frame_like(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the runs table's other columns, empty."""
    declared = schema("runs_table", k=2)
    return frame.with_columns(
        pl.lit(None, dtype=dtype).alias(name) for name, dtype in declared.items()
        if name not in frame.columns).with_columns(pl.lit(False).alias("chosen"))


def test_a_switch_the_configuration_changes_follows_its_method() -> None:
    assert variant("rrhf_self_judge_no_hinge_lr0.0003") == "no_hinge"
    assert variant("rrhf_self_judge_lambda0") is None
    assert variant("sft_lr0.0003") is None  # "sft" as a method, not the switch


# The asset: inputs, metadata, and tracking off without importing MLflow.

def _seed_inputs(out: Path) -> None:
    """The base and cell eval reports and the selections, as the IO manager stores them."""
    def report(*seeds: dict[str, tuple[int, int]]) -> pl.DataFrame:
        return pl.concat([eval_report(counts, cell="3x1", training_replicate=r)
                          for r, counts in enumerate(seeds)])

    frames = {("eval", "base"): report(BASE),
              ("saturated", "eval", "dpo_entropy"): report(ALL_RIGHT, HALF),
              ("saturated", "eval", "dpo_entropy_lr0.001"): report(HALF, HALF),
              ("saturated", "eval", "sft"): report(HALF, ALL_RIGHT)}
    settings = {"learning_rate": 1e-3, "epochs": 2, "batch_size": 8}
    for cell, winner in (("dpo_entropy", "dpo_entropy_lr0.0003"), ("sft", "sft")):
        frames[("saturated", "selection", cell)] = selection_table([
            Trained(cell, settings, [0.5, 0.5], [1, 1]),
            Trained(f"{cell}_lr0.0003", {**settings, "learning_rate": 3e-4},
                    [0.9 if winner != cell else 0.1] * 2, [1, 1])])
    for key, frame in frames.items():
        path = asset_path(out, TASK, *key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(frame, path)  # as the pipeline writes it


def _materialise(out: Path, overrides: dict) -> dg.ExecuteInProcessResult:
    everything, _ = graph("demo", overrides)
    (table,) = by_name(everything, TASK, "runs_table")
    return dg.materialize(everything, selection=[table.key],
                          resources=resources(out, "demo", overrides),
                          instance=dg.DagsterInstance.ephemeral())


def test_the_asset_reads_every_report_and_selection() -> None:
    everything, _ = graph("demo", OVERRIDES)
    (table,) = by_name(everything, TASK, "runs_table")
    upstream = {"/".join(k.path) for k in table.dependency_keys}
    assert upstream == {"chain_sum/eval/base", "chain_sum/saturated/eval/dpo_entropy",
                        "chain_sum/saturated/eval/dpo_entropy_lr0.001",
                        "chain_sum/saturated/eval/sft",
                        "chain_sum/saturated/selection/dpo_entropy",
                        "chain_sum/saturated/selection/sft"}
    assert table.group_names_by_key[table.key] == TASK


def test_materialises_with_tracking_off_and_no_mlflow(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    _seed_inputs(out)
    for name in [m for m in sys.modules if m.startswith("mlflow.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # any `import mlflow` now fails
    result = _materialise(out, OVERRIDES)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert next(iter(metadata)) == "summary" and "MLflow: off" in metadata["summary"].value
    assert metadata["adapters"].value == len(ADAPTERS) and metadata["chosen"].value == 6
    assert metadata["evaluated"].value == 6
    assert "mlflow_uri" not in metadata and not (out / "mlflow.db").exists()
    inline = [key for key in metadata if key.startswith("runs: ")]  # one table per split
    records = [r for key in inline for r in metadata[key].value.records]  # 8: all inline
    assert inline and all("split" not in [c.name for c in metadata[k].value.schema.columns]
                          for k in inline)
    assert len(records) == len(ADAPTERS)
    assert {r.data["η"] for r in records} == {"1e\u20113", "3e\u20114"}
    assert "every row, one table per split;" in metadata["summary"].value
    stored = pl.read_parquet(asset_path(out, TASK, "runs_table"))
    check_frame(stored, "runs_table")
    assert stored.height == len(ADAPTERS)
    # the same rows as a CSV beside the task's other tables
    assert pl.read_csv(out / TASK / "runs_table.csv").height == stored.height
    assert out / metadata["csv"].value == out / TASK / "runs_table.csv"  # in the output folder
