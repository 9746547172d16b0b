"""The code location as a researcher uses it: validate, then `dagster job execute`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jobs.staged import part_names, whole_jobs
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first

DAGSTER = str(Path(sys.executable).parent / "dagster")
DG = str(Path(sys.executable).parent / "dg")


def _env(tmp_path: Path, profile: str) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    return {**os.environ, "DAGSTER_HOME": str(home), "SATURATED_DAG_PROFILE": profile,
            "SATURATED_DAG_OUTPUT_DIR": str(tmp_path / "outputs")}


def test_definitions_validate() -> None:
    out = subprocess.run([DAGSTER, "definitions", "validate", "-w", "workspace.yaml"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "All code locations passed validation" in out.stderr + out.stdout


def test_invalid_profile_fails_at_load(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntasks: [chain_sum]\npolicy: {model: x, backend: tf}\n")
    out = subprocess.run([DAGSTER, "definitions", "validate", "-f", "definitions.py"],
                         cwd=REPO_ROOT, env=_env(tmp_path, str(bad)), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0
    assert "policy.backend" in out.stderr + out.stdout


def _tiny_profile(tmp_path: Path, model: Path) -> Path:
    profile = {
        "name": "tiny", "tasks": ["chain_sum"],
        "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                      "strict_grid": None},
        "policy": {"model": str(model), "batch_size": 8},
        "sampling": {"n": 2, "max_new_tokens": 6},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _one_successful_run(tmp_path: Path, env: dict[str, str]) -> None:
    """The run landed in the instance, and the generation job's last file exists."""
    assert (tmp_path / "outputs" / "assets" / "chain_sum" / "difficulty_partitions.parquet"
            ).is_file()
    check = subprocess.run(
        [sys.executable, "-c",
         "import dagster as dg; i = dg.DagsterInstance.get(); "
         "runs = i.get_runs(); print(len(runs), runs[0].job_name, runs[0].status.value)"],
        env=env, capture_output=True, text=True, timeout=120)
    assert check.stdout.split() == ["1", "chain_sum_generation", "SUCCESS"], check.stderr


def test_job_execute_records_run_in_instance(tmp_path: Path, tiny_model_dir: Path) -> None:
    env = _env(tmp_path, str(_tiny_profile(tmp_path, tiny_model_dir)))
    out = subprocess.run([DAGSTER, "job", "execute", "-f", "definitions.py",
                          "-j", "chain_sum_generation"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    _one_successful_run(tmp_path, env)


def test_dg_cli_lists_and_launches_from_the_project_settings(tmp_path: Path,
                                                             tiny_model_dir: Path) -> None:
    """The current CLI, ``dg``, finds the code location through ``[tool.dg]`` in
    pyproject.toml: ``dg list defs`` shows the jobs and ``dg launch --job`` runs one into the
    instance, as ``dagster job execute`` does."""
    env = _env(tmp_path, str(_tiny_profile(tmp_path, tiny_model_dir)))
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)  # the venv dg runs in
    listed = subprocess.run([DG, "list", "defs", "--json"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "chain_sum_generation" in listed.stdout
    out = subprocess.run([DG, "launch", "--job", "chain_sum_generation"], cwd=REPO_ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    _one_successful_run(tmp_path, env)


def test_every_profile_loads_with_its_jobs_schedule_and_sensor(tmp_path: Path) -> None:
    """What `dagster definitions validate` loads, per shipped profile: the jobs by name."""
    script = """
import importlib, json, os
import definitions
for profile in ("demo", "ci", "study", "testbed", "paper", "paper_instruct"):
    os.environ["SATURATED_DAG_PROFILE"] = profile
    repo = importlib.reload(definitions).defs.get_repository_def()
    print(json.dumps([profile, sorted(repo.job_names),
                      sorted(s.name for s in repo.schedule_defs),
                      sorted(s.name for s in repo.sensor_defs)]))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, text=True,
                         capture_output=True, env=_env(tmp_path, "demo"), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("[")]
    assert [p for p, *_ in loaded] == ["demo", "ci", "study", "testbed", "paper",
                                       "paper_instruct"]
    for profile, jobs, schedules, sensors in loaded:
        loaded_profile = load_profile(profile)
        tasks = loaded_profile.tasks  # a task the profile does not run has no job
        # a whole-task job is one part per partition set of its cells' adapters (jobs/staged.py);
        # a location lists its own profile's whole-graph jobs only (jobs.staged.whole_jobs)
        parts = [name for job, covered in whole_jobs(loaded_profile).items()
                 for name in part_names(job, loaded_profile, covered)]
        assert set(jobs) == {"__ASSET_JOB", *parts, "nightly_evaluation",
                             "pretrain_base_model",
                             *(f"{t}_generation" for t in tasks)}, profile
        assert not any(j.startswith("study_") for j in jobs) or profile == "study"
        assert schedules == ["nightly_evaluation"]
        assert sensors == ["automation_cpu", "automation_gpu"]
