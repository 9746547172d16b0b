"""A run uses exactly one profile and one output folder, the code location's (issue 15, item 1).

Before, ``profile`` and ``output_dir`` were run config of ``experiment`` with defaults of their
own: a run.yaml that set only the overrides made ``experiment`` fall back to ``demo`` and
``./outputs`` while the IO manager kept the environment's folder, so a ``ci`` location wrote the
demo's eval over its own. Now both live in one ``ExperimentLocation`` nested, fully configured,
in ``experiment`` and ``parquet_io``, which Dagster keeps out of run config.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from resources import ExperimentResource, make_resources
from resources.experiment import OUTPUT_DIR_LABEL, OUTPUT_DIR_TAG, PROFILE_LABEL, PROFILE_TAG
from resources.parquet_io import FILE_KEY, FOLDER_KEY
from saturated_dag.data.questions import eval_questions
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT

DAGSTER = str(Path(sys.executable).parent / "dagster")


def _probe_job(resources: dict, seen: dict) -> dg.JobDefinition:
    @dg.asset
    def probe(experiment: ExperimentResource) -> None:
        seen["settings"] = experiment.settings
        seen["where"] = (experiment.profile, experiment.output_dir)

    defs = dg.Definitions(assets=[probe], resources=resources, executor=dg.in_process_executor)
    return defs.resolve_implicit_global_asset_job_def()


@pytest.mark.parametrize("resource, config", [
    ("experiment", {"profile": "demo"}),
    ("experiment", {"output_dir": "outputs"}),
    ("experiment", {"location": {"profile": "demo", "output_dir": "outputs"}}),
    ("parquet_io", {"base_dir": "elsewhere"}),
    ("parquet_io", {"location": {"profile": "demo", "output_dir": "outputs"}}),
])
def test_run_config_cannot_name_a_profile_or_an_output_folder(
        tmp_path: Path, resource: str, config: dict) -> None:
    job = _probe_job(make_resources("ci", str(tmp_path)), {})
    result = dg.validate_run_config(job, {"resources": {"experiment": {"config": {
        "overrides": {"sampling": {"n": 4}}}}}})
    assert result["resources"]["experiment"]["config"]["overrides"]["sampling"]["n"] == 4
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"resources": {resource: {"config": config}}})


def test_launch_overrides_change_only_what_they_name_and_the_run_is_tagged(
        tmp_path: Path) -> None:
    seen: dict = {}
    resources = make_resources("ci", str(tmp_path), {"policy": {"batch_size": 8},
                                                     "sampling": {"n": 2}})
    job = _probe_job(resources, seen)
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, run_config={"resources": {
            "experiment": {"config": {"overrides": {"sampling": {"temperature": 0.5}}}}}})
        assert result.success
        tags = instance.get_run_by_id(result.run_id).tags
    settings = seen["settings"]
    assert seen["where"] == ("ci", str(tmp_path))
    assert settings.name == load_profile("ci").name
    assert (settings.sampling.n, settings.sampling.temperature, settings.policy.batch_size) == (
        2, 0.5, 8)  # the location's n and batch size kept, the launch's temperature added
    assert tags[PROFILE_TAG] == "ci" and tags[OUTPUT_DIR_TAG] == str(tmp_path.resolve())


def test_a_run_tagged_for_another_profile_is_refused(tmp_path: Path) -> None:
    job = _probe_job(make_resources("ci", str(tmp_path)), {})
    with dg.instance_for_test() as instance, pytest.raises(dg.DagsterResourceFunctionError) as err:
        job.execute_in_process(instance=instance, tags={PROFILE_TAG: "demo"})
    text = str(err.value.__cause__)
    assert "serves profile 'ci'" in text and "SATURATED_DAG_PROFILE" in text


def test_cli_run_config_with_overrides_keeps_the_locations_profile_and_folder(
        tmp_path: Path) -> None:
    """The issue's reproduction: ``SATURATED_DAG_PROFILE=ci`` and a run.yaml with only
    overrides; the ``ci`` eval lands in the configured folder, nothing in ``./outputs``."""
    out, cwd, home = tmp_path / "configured", tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(yaml.safe_dump(
        {"resources": {"experiment": {"config": {"overrides": {"sampling": {"n": 4}}}}}}))
    env = {**os.environ, "DAGSTER_HOME": str(home), "SATURATED_DAG_PROFILE": "ci",
           "SATURATED_DAG_OUTPUT_DIR": str(out)}
    cli = [DAGSTER, "asset", "materialize", "-f", str(REPO_ROOT / "definitions.py"),
           "-d", str(REPO_ROOT), "--select", "chain_sum/eval/base", "-c", str(run_yaml)]
    run = subprocess.run(cli, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "profile 'ci'" in run.stderr + run.stdout
    assert not (cwd / "outputs").exists()
    report = pl.read_parquet(out / "assets" / "chain_sum" / "eval" / "base.parquet")
    per_question = report.group_by("question_id").len()
    assert sorted(per_question["question_id"]) == sorted(
        q.question_id for q in eval_questions(load_profile("ci"), "chain_sum"))
    assert set(per_question["len"].to_list()) == {4}  # n=4 samples each, the override's

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.get_run_records()
        assert record.dagster_run.tags[PROFILE_TAG] == "ci"
        assert record.dagster_run.tags[OUTPUT_DIR_TAG] == str(out.resolve())
        event = instance.get_latest_materialization_event(
            dg.AssetKey(["chain_sum", "eval", "base"]))
        metadata = event.asset_materialization.metadata  # type: ignore[union-attr]
        assert metadata[PROFILE_LABEL].value == "ci"
        assert metadata[OUTPUT_DIR_LABEL].value == str(out.resolve())
        assert metadata[FOLDER_KEY].value == "assets/chain_sum/eval"  # in that folder
        assert metadata[FILE_KEY].value == "base.parquet"

    # naming the profile in run config is a config error, before anything runs
    run_yaml.write_text(yaml.safe_dump(
        {"resources": {"experiment": {"config": {"profile": "demo"}}}}))
    refused = subprocess.run([DAGSTER, "job", "execute", "-f", str(REPO_ROOT / "definitions.py"),
                              "-d", str(REPO_ROOT), "-j", "chain_sum_generation", "-c",
                              str(run_yaml)],
                             cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0
    assert "profile" in refused.stderr and not (cwd / "outputs").exists()
