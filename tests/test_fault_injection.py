"""Issue 9 acceptance: SIGKILL a materialisation part-way, re-run, and check the resume.

The generation pool and the self-judge tournament run under the real CLI
(``dagster asset materialize -f definitions.py``) against a persistent ``DAGSTER_HOME``. Once
at least one shard is on disk the whole process group is killed with SIGKILL (a killed pod).
The re-run must reuse exactly the shards that were on disk (same files, untouched), compute
only the rest, and give the same table as an uninterrupted run with the same seed.

A SIGKILLed run never reports its end, so the instance keeps it STARTED and keeps the
``gpu`` pool slot it claimed: the next run would wait for that slot forever. The re-run is
preceded by the recovery an operator does (``fail_dead_runs``: mark the dead run failed and
free its slots), see docs/reliability.md.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from resources.parquet_io import asset_file
from tests.conftest import REPO_ROOT

PROFILE = {
    "name": "fault",
    "description": "small chain-sum profile for the fault-injection tests",
    "tasks": ["chain_sum"],
    "chain_sum": {"grid": {"terms": [3, 3], "digits": [1, 1]}, "questions_per_cell": 12,
                  "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
                  "strict_questions_per_cell": 8, "eval_questions_per_cell": 2},
    "policy": {"backend": "transformers", "model": "arith-base", "batch_size": 64},
    "sampling": {"n": 8, "max_new_tokens": 96, "seed": 0},
    "judges": {"self_judge": {"instruct": True}, "strong": {"kind": "rubric"}},
    "scoring": {"judge_max_new_tokens": 96, "judge_batch_size": 16},
    "training": {"splits": ["saturated"], "scorers": ["self_judge"], "methods": ["sft"],
                 "epochs": 1, "batch_size": 4, "per_device_batch_size": 4,
                 "validation_questions_per_cell": 2},
    "stages": {"shard_questions": 4},
}
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})
RESUMED = re.compile(r"cache (\w+): (\S+) (\w+) reused (\d+), computed (\d+) of (\d+) shards")


def write_profile(path: Path, scoring: dict | None = None, **stages: object) -> Path:
    data = {**PROFILE, "stages": {**PROFILE["stages"], **stages},
            "scoring": {**PROFILE["scoring"], **(scoring or {})}}
    path.write_text(yaml.safe_dump(data))
    return path


def dagster_home(tmp: Path) -> Path:
    home = tmp / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    return home


def cli(select: str, profile: Path, out: Path, home: Path) -> subprocess.Popen:
    """``dagster asset materialize`` in its own process group (so a kill takes all of it)."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "SATURATED_DAG_PROFILE": str(profile),
           "SATURATED_DAG_OUTPUT_DIR": str(out), "HF_HUB_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    dagster = Path(sys.executable).with_name("dagster")
    return subprocess.Popen(
        [str(dagster), "asset", "materialize", "-f", "definitions.py", "--select", select,
         "--config-json", IN_PROCESS],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)


def shards(out: Path, stage: str) -> dict[str, tuple[int, int]]:
    """Shard file name -> (inode, mtime_ns) under the stage's one key folder."""
    found = {}
    for path in (out / "stages" / stage).glob("*/shard-*.parquet"):
        st = path.stat()
        found[path.name] = (st.st_ino, st.st_mtime_ns)
    return found


def kill_after_first_shard(proc: subprocess.Popen, out: Path, stage: str,
                           timeout: float = 300) -> dict[str, tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while not shards(out, stage):
        if proc.poll() is not None:
            pytest.fail(f"the run ended before writing a shard:\n{proc.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("no shard written in time")
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return shards(out, stage)


def fail_dead_runs(home: Path) -> int:
    """Mark runs whose process is gone as failed and free their pool slots."""
    from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

    with dg.DagsterInstance.from_config(str(home)) as instance:
        stuck = instance.get_runs(filters=RunsFilter(
            statuses=[DagsterRunStatus.STARTED, DagsterRunStatus.STARTING]))
        for run in stuck:
            instance.report_run_failed(run, "the run's process was killed (SIGKILL)")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        return len(stuck)


def finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, output[-4000:]
    return output


def reference(tmp: Path, profile: Path, names: list[str], out: Path) -> None:
    """An uninterrupted materialisation in this process, with the same definitions."""
    from assets import ALL_ASSETS
    from resources import ExperimentResource, GenerationResource, JudgeResource, ParquetIOManager
    from saturated_dag.config import load_profile

    settings = load_profile(str(profile))
    keys = [dg.AssetKey(["chain_sum", n]) for n in names]
    result = dg.materialize(
        ALL_ASSETS, selection=dg.AssetSelection.assets(*keys),
        resources={
            "experiment": ExperimentResource(profile=str(profile), output_dir=str(out)),
            "policy": GenerationResource.from_settings(settings.policy,
                                                       seed=settings.sampling.seed),
            "strong_judge": JudgeResource.from_settings(settings.judges.strong),
            "parquet_io": ParquetIOManager(base_dir=str(out / "assets")),
        })
    assert result.success


def check_resumed(log: str, stage: str, before: dict[str, tuple[int, int]],
                  after: dict[str, tuple[int, int]]) -> None:
    match = RESUMED.search(log)
    assert match, log[-4000:]
    status, name, _key, reused, computed, total = match.groups()
    assert (status, name) == ("resumed", stage)
    assert int(reused) == len(before) >= 1 and int(computed) == int(total) - len(before) >= 1
    for shard, stamp in before.items():
        assert after[shard] == stamp, f"{shard} was rewritten"
    assert len(after) == int(total)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The uninterrupted reference pool and partitions (profile, output folder)."""
    tmp = tmp_path_factory.mktemp("reference")
    profile = write_profile(tmp / "profile.yaml")
    reference(tmp, profile, ["generation_pool", "difficulty_partitions"], tmp / "out")
    return profile, tmp / "out"


def kill_and_resume(select: str, stage: str, profile: Path, out: Path, home: Path) -> None:
    """SIGKILL the step after its first shard, recover the run, re-run, check the resume."""
    before = kill_after_first_shard(cli(select, profile, out, home), out, stage)
    assert not asset_file(out / "assets", select.split("/")).exists()
    assert fail_dead_runs(home) == 1
    log = finish(cli(select, profile, out, home))
    check_resumed(log, select, before, shards(out, stage))


def test_sigkill_during_generation_resumes_from_shards(tmp_path: Path,
                                                       upstream: tuple[Path, Path]) -> None:
    profile, ref_out = upstream
    home, out = dagster_home(tmp_path), tmp_path / "out"
    select, stage = "chain_sum/generation_pool", "chain_sum__generation_pool"
    kill_and_resume(select, stage, profile, out, home)
    resumed = pd.read_parquet(out / "assets" / "chain_sum" / "generation_pool.parquet")
    expected = pd.read_parquet(ref_out / "assets" / "chain_sum" / "generation_pool.parquet")
    pd.testing.assert_frame_equal(resumed, expected)


def test_sigkill_during_self_judging_resumes_from_shards(tmp_path: Path,
                                                         upstream: tuple[Path, Path]) -> None:
    _, ref_out = upstream
    # judge the saturated split only (a few questions), two questions per shard
    profile = write_profile(tmp_path / "profile.yaml", shard_questions=2, scoring={
        "correct_splits": ["saturated"], "all_completion_splits": [],
        "judge_max_new_tokens": 48})
    # the same upstream tables in the reference folder and in the one whose run is killed
    home, out = dagster_home(tmp_path), tmp_path / "out"
    shutil.copytree(ref_out / "assets", out / "assets")
    judge_ref = tmp_path / "reference"
    shutil.copytree(ref_out / "assets", judge_ref / "assets")
    reference(tmp_path, profile, ["self_judge_scores"], judge_ref)

    select, stage = "chain_sum/self_judge_scores", "chain_sum__self_judge_scores"
    kill_and_resume(select, stage, profile, out, home)
    for rel in ["assets/chain_sum/self_judge_scores.parquet",
                "chain_sum/self_judge_comparisons.parquet"]:
        pd.testing.assert_frame_equal(pd.read_parquet(out / rel),
                                      pd.read_parquet(judge_ref / rel))
