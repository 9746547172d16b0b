"""Issue 33, item 4: the runs table's rows as MLflow runs, on a real local store in tmp_path.

Logged once, read back (params, metrics, tags, artifacts); logged again unchanged, nothing is
added; a changed row is a new run; a run a crash left unfinished is replaced, not duplicated.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import dagster as dg
import pytest
from mlflow.tracking import MlflowClient

from saturated_dag.config import TrackingSettings
from saturated_dag.reporting.tracking import (
    KEY_TAG,
    Source,
    TrackingError,
    git_state,
    log_rows,
    metric_name,
    row_content,
    row_key,
    trainer_environment,
)
from tests.pipeline import asset_path, by_name, graph, resources
from tests.reporting.test_runs_table import ADAPTERS, OVERRIDES, _frame, _materialise, _seed_inputs

SOURCE = Source("demo", "/runs/out", "0123abcd" * 5, False, {"saturated_dag.dagster_run": "r1"})


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def _active(client: MlflowClient, experiment_id: str) -> dict[str, list]:
    runs: dict[str, list] = {}
    for run in client.search_runs([experiment_id], max_results=1000):
        runs.setdefault(run.info.run_name, []).append(run)
    return runs


def test_rows_become_runs_and_read_back(tmp_path: Path) -> None:
    rows = _frame(tmp_path / "adapters").to_dicts()
    uri = _store(tmp_path)
    logged = log_rows(rows, uri, "saturated-dag", SOURCE)
    assert len(logged.logged) == len(rows) and not logged.unchanged and logged.uri == uri
    client = MlflowClient(tracking_uri=uri)
    assert client.get_experiment(logged.experiment_id).name == "saturated-dag"
    runs = _active(client, logged.experiment_id)
    assert set(runs) == {r["adapter"] for r in rows}
    (won,) = runs["dpo_entropy_lr0.0003"]
    assert won.info.status == "FINISHED"
    assert won.data.params["learning_rate"] == "0.0003" and won.data.params["dpo_beta"] == "0.1"
    assert won.data.params["seed"] == "0" and won.data.params["precision"] == "float32"
    assert "rrhf_rank_weight" not in won.data.params  # not a DPO setting: not "None"
    metrics = won.data.metrics
    assert metrics["pass_at_1"] == pytest.approx(100.0)
    assert metrics["delta_pass_at_1"] == pytest.approx(50.0)
    assert metrics["delta_pass_at_1_low"] == pytest.approx(12.5)
    assert metrics["delta_pass_at_2_high"] == pytest.approx(75.0)
    assert metrics["validation_pass_at_1"] == pytest.approx(75.0) and metrics["epoch_kept"] == 2
    tags = won.data.tags
    assert tags["saturated_dag.profile"] == "demo" and tags["saturated_dag.task"] == "chain_sum"
    assert tags["mlflow.source.git.commit"] == SOURCE.commit
    assert (tags["saturated_dag.split"], tags["saturated_dag.method"],
            tags["saturated_dag.scorer"]) == ("saturated", "dpo", "entropy")
    assert tags["saturated_dag.chosen"] == "true" and tags["saturated_dag.dagster_run"] == "r1"
    assert tags["saturated_dag.dirty"] == "false"
    assert {a.path for a in client.list_artifacts(won.info.run_id)} == {
        "runs_table_row.json", "training_config.json"}
    row = json.loads(Path(client.download_artifacts(won.info.run_id, "runs_table_row.json",
                                                     str(tmp_path))).read_text())
    assert row["adapter"] == "dpo_entropy_lr0.0003" and row["pass@1"] == pytest.approx(100.0)
    (lost,) = runs["sft_lr0.0003"]  # not chosen: no eval report, so no eval metrics
    assert "pass_at_1" not in lost.data.metrics and lost.data.tags["saturated_dag.chosen"] == (
        "false")
    assert lost.data.metrics["validation_pass_at_1"] == pytest.approx(75.0)


def test_logging_again_adds_only_what_changed(tmp_path: Path) -> None:
    rows = _frame(tmp_path / "adapters").to_dicts()
    uri = _store(tmp_path)
    first = log_rows(rows, uri, "saturated-dag", SOURCE)
    again = log_rows(rows, uri, "saturated-dag", SOURCE)
    assert not again.logged and len(again.unchanged) == len(rows)
    client = MlflowClient(tracking_uri=uri)
    assert sum(map(len, _active(client, first.experiment_id).values())) == len(rows)

    rows[0] = {**rows[0], "pass@1": 1.0}  # one more nightly replicate moved it: a new result
    changed = log_rows(rows, uri, "saturated-dag", SOURCE)
    assert changed.logged == [rows[0]["adapter"]] and len(changed.unchanged) == len(rows) - 1
    assert len(_active(client, first.experiment_id)[rows[0]["adapter"]]) == 2

    rows[1] = {**rows[1], "pass@1": 2.0}  # a crash left this row's run unfinished
    content = row_content(rows[1], SOURCE)
    crashed = client.create_run(first.experiment_id, run_name=content.name, tags=content.tags)
    replaced = log_rows(rows, uri, "saturated-dag", SOURCE)
    assert replaced.logged == replaced.replaced == [rows[1]["adapter"]]
    assert client.get_run(crashed.info.run_id).info.lifecycle_stage == "deleted"
    active = _active(client, first.experiment_id)[rows[1]["adapter"]]
    assert len(active) == 2 and all(r.info.status == "FINISHED" for r in active)

    other = Source("paper", SOURCE.output_dir, SOURCE.commit)  # another profile: its own runs
    assert len(log_rows(rows[:1], uri, "saturated-dag", other).logged) == 1


def test_row_key_and_names() -> None:
    row = {"task": "chain_sum", "adapter": "sft", "pass@1": 50.0, "dpo_beta": None}
    assert row_key(row, SOURCE) == row_key(dict(row), SOURCE)
    assert row_key(row, SOURCE) != row_key({**row, "pass@1": 50.5}, SOURCE)
    later = Source(SOURCE.profile, SOURCE.output_dir, "f" * 40)
    assert row_key(row, SOURCE) != row_key(row, later)  # another commit: another run
    same_run = Source(SOURCE.profile, SOURCE.output_dir, SOURCE.commit, SOURCE.dirty,
                      {"saturated_dag.dagster_run": "r2"})
    assert row_key(row, SOURCE) == row_key(row, same_run)  # the Dagster run is not the result
    content = row_content(row, SOURCE)
    assert content.tags[KEY_TAG] == row_key(row, SOURCE) and content.params == {}
    assert content.metrics == {"pass_at_1": 50.0}
    assert metric_name("Δ pass@8 low") == "delta_pass_at_8_low"
    assert metric_name("validation pass@1") == "validation_pass_at_1"


def test_tracking_without_mlflow_names_the_setting(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(TrackingError, match=r"tracking\.mlflow is on but MLflow is not "
                                            r"installed.*saturated-dag\[mlflow\]"):
        log_rows([{"task": "chain_sum", "adapter": "sft"}], _store(tmp_path), "x", SOURCE)


def test_git_state(tmp_path: Path) -> None:
    commit, dirty = git_state(Path(__file__).parent)
    assert commit is not None and re.fullmatch(r"[0-9a-f]{40}", commit)
    assert isinstance(dirty, bool)
    assert git_state(tmp_path) == (None, None)  # not a checkout


def test_the_runs_table_asset_logs_its_rows_when_tracking_is_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _seed_inputs(out)
    overrides = {**OVERRIDES, "tracking": {"mlflow": True}}
    uri = f"sqlite:///{out.resolve() / 'mlflow.db'}"  # the default: beside the outputs
    for logged, unchanged in ((len(ADAPTERS), 0), (0, len(ADAPTERS))):
        result = _materialise(out, overrides)
        (event,) = result.get_asset_materialization_events()
        metadata = event.materialization.metadata
        assert metadata["mlflow_uri"].value == uri
        assert metadata["mlflow_runs"].value.startswith(f"{logged} run(s) logged")
        assert metadata["mlflow_runs"].value.endswith(f"{unchanged} unchanged")
        assert f"MLflow: `{uri}`" in metadata["summary"].value
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("saturated-dag")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert {r.info.run_name for r in runs} == ADAPTERS and len(runs) == len(ADAPTERS)
    tags = runs[0].data.tags
    assert tags["saturated_dag.profile"] == "demo"
    assert tags["saturated_dag.output_dir"] == str(out.resolve())
    assert re.fullmatch(r"[0-9a-f]{40}", tags["mlflow.source.git.commit"])


def test_trainer_environment_only_when_tracking_is_on(tmp_path: Path) -> None:
    tags = {"saturated_dag.adapter": "sft"}
    assert trainer_environment(TrackingSettings(), tmp_path, tags) == {}
    env = trainer_environment(TrackingSettings(mlflow=True), tmp_path, tags)
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert env["MLFLOW_EXPERIMENT_NAME"] == "saturated-dag"
    assert json.loads(env["MLFLOW_TAGS"]) == tags


def test_a_tracked_training_logs_its_steps_to_the_output_folders_store(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """With ``tracking.mlflow`` on, the trainer reports (``report_to="mlflow"``) to the same
    local store as the runs table, tagged with its adapter, and the process's environment is
    as before afterwards (in-process training must not leak one adapter's tags)."""
    import os

    import polars as pl

    from saturated_dag.config import TrainingSettings
    from saturated_dag.generation.models import load_model  # noqa: F401  (the tiny model loads)
    from saturated_dag.training.runner import environment
    from saturated_dag.training.train import train_adapter
    from tests.training.test_training import BAD, FAST, GOOD, PROMPT

    tracking = TrackingSettings(mlflow=True)
    env = trainer_environment(tracking, tmp_path, {"saturated_dag.adapter": "sft"})
    before = dict(os.environ)
    data = pl.DataFrame({"prompt": [PROMPT] * 4, "completion": [GOOD, BAD] * 2})
    with environment(env):
        train_adapter("sft", str(tiny_model_dir), data, TrainingSettings(**FAST),
                      tmp_path / "sft", report_to=tracking.report_to)
    assert dict(os.environ) == before
    client = MlflowClient(tracking.uri(tmp_path))
    experiment = client.get_experiment_by_name(tracking.experiment)
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1 and runs[0].data.tags["saturated_dag.adapter"] == "sft"
    assert "train_loss" in runs[0].data.metrics or "loss" in runs[0].data.metrics


BAD_URI = "sqlite:////proc/nope/mlflow.db"
"""A store that cannot be made: ``/proc`` takes no new folder (issue 46's probe)."""


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = result.get_step_failure_events()
    return failure.step_failure_data.error.message


def test_a_bad_store_fails_the_runs_table_naming_the_setting_and_keeps_its_csv(
        tmp_path: Path) -> None:
    """Issue 46: a store that cannot be opened failed with a bare ``FileNotFoundError:
    '/proc/nope'``, after ``runs_table.csv`` had been rewritten. Now the step fails at its
    start naming ``tracking.tracking_uri``, its value and why, and the CSV is untouched."""
    out = tmp_path / "out"
    _seed_inputs(out)
    csv = out / "chain_sum" / "runs_table.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    csv.write_text("adapter\nfrom the run before\n")
    before = csv.stat().st_mtime_ns
    overrides = {**OVERRIDES, "tracking": {"mlflow": True, "tracking_uri": BAD_URI}}
    everything, _ = graph("demo", overrides)
    (table,) = by_name(everything, "chain_sum", "runs_table")
    result = dg.materialize(everything, selection=[table.key],
                            resources=resources(out, "demo", overrides),
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert not result.success
    message = _failure_message(result)
    assert f"tracking.tracking_uri = '{BAD_URI}'" in message
    assert "FileNotFoundError" in message and "/proc/nope" in message
    assert csv.read_text() == "adapter\nfrom the run before\n"
    assert csv.stat().st_mtime_ns == before
    assert not asset_path(out, "chain_sum", "runs_table").exists()


def test_a_bad_store_fails_training_before_it_starts_naming_the_setting(
        tmp_path: Path) -> None:
    """The trainers' store is opened when the step builds its training requests, so a bad one
    names its setting instead of failing the trainer with ``FileNotFoundError``."""
    tracking = TrackingSettings(mlflow=True, tracking_uri=BAD_URI)
    with pytest.raises(TrackingError, match=r"tracking\.tracking_uri = 'sqlite:////proc/nope/"
                                            r"mlflow\.db': the MLflow store cannot be opened "
                                            r"\(FileNotFoundError"):
        trainer_environment(tracking, tmp_path, {"saturated_dag.adapter": "sft"})
    good = TrackingSettings(mlflow=True)
    assert trainer_environment(good, tmp_path, {})["MLFLOW_TRACKING_URI"] == good.uri(tmp_path)
    assert (tmp_path / "mlflow.db").is_file()  # opened once, at the start
