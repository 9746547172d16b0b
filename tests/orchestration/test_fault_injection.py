"""Killed runs clean up after themselves and resume from their shards (issues 9 and 14).

Runs are started the way the UI, a schedule or a sensor starts them: a persistent instance
(``DAGSTER_HOME`` holding the repository's ``dagster.yaml``), a code server (``dagster api
grpc``), the daemon (``dagster-daemon run``) and ``dagster job launch``. The daemon's run
launcher starts each run in a child process of the code server. The tests SIGKILL that run
process (what the OOM killer or ``kill -9`` does) and then take no manual step:

* the code server sees its run process gone and marks the run failed, naming the signal;
* run monitoring frees the ``gpu`` pool slot the dead run held (a finished run keeps none);
* run retries launch the run again from failure, and that retry gets the ``gpu`` slot;
* for the generation pool and the self-judge tournament, the retried step resumes from the
  shards on disk: it reuses exactly those (same files, untouched), computes only the rest and
  gives the same table as an uninterrupted run with the same seed.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import dagster as dg
import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from resources import make_resources
from resources.parquet_io import asset_file
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first

T = TypeVar("T")
BIN = Path(sys.executable).parent
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
RESUMED = re.compile(r"cache (\w+): (\S+) (\w+) reused (\d+), computed (\d+) of (\d+) shards")
# A pool="gpu" asset that waits, holding the slot, until the test lets it finish.
PROBE_LOCATION = '''
import os
import time
from pathlib import Path

import dagster as dg

WORK = Path(os.environ["PROBE_WORK"])


@dg.asset(pool="gpu")
def hold_gpu() -> None:
    (WORK / "pids").mkdir(exist_ok=True)
    (WORK / "pids" / str(os.getpid())).touch()
    while not (WORK / "release").exists():
        time.sleep(0.1)


defs = dg.Definitions(assets=[hold_gpu], jobs=[dg.define_asset_job("hold_gpu_job", [hold_gpu])],
                      executor=dg.in_process_executor)
'''


def write_profile(path: Path, scoring: dict | None = None, **stages: object) -> Path:
    data = {**PROFILE, "stages": {**PROFILE["stages"], **stages},
            "scoring": {**PROFILE["scoring"], **(scoring or {})}}
    path.write_text(yaml.safe_dump(data))
    return path


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:.0f} s")


class Process:
    """A background command in its own session; its output is kept for failure messages."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)[-6000:]

    def stop(self) -> None:
        """SIGTERM the session (the process and what it started), SIGKILL what is left."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@contextmanager
def deployment(tmp: Path, location: list[str], env: dict[str, str], cwd: Path
               ) -> Iterator[tuple[dg.DagsterInstance, Callable[..., str]]]:
    """Instance, code server and daemon; yields the instance and ``launch(job)``."""
    home = tmp / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    socket = str(tmp / "code.sock")
    env = {**os.environ, **env, "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    workspace = tmp / "workspace.yaml"
    workspace.write_text(yaml.safe_dump({"load_from": [{"grpc_server": {
        "socket": socket, "host": "localhost", "location_name": "under_test"}}]}))
    server = Process([str(BIN / "dagster"), "api", "grpc", *location, "--socket", socket],
                     env, cwd)
    daemon = None
    try:
        wait_for(lambda: "Started Dagster code server" in server.output()
                 or server.proc.poll() is not None, 240, "code server start")
        assert server.proc.poll() is None, server.output()
        daemon = Process([str(BIN / "dagster-daemon"), "run", "-w", str(workspace)], env, cwd)

        def launch(job: str) -> str:
            run_id = str(uuid.uuid4())
            args = [str(BIN / "dagster"), "job", "launch", "-w", str(workspace), "-j", job,
                    "--run-id", run_id]
            done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            return run_id

        with dg.DagsterInstance.from_config(str(home)) as instance:
            yield instance, launch
    except BaseException:
        print("code server:\n" + server.output())
        if daemon is not None:
            print("daemon:\n" + daemon.output())
        raise
    finally:
        if daemon is not None:
            daemon.stop()
        server.stop()


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the process executing the run's steps (its "Executing steps" event)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = entry.dagster_event.engine_event_data if entry.dagster_event else None
        if data is not None and "pid" in data.metadata and "Executing steps" in (
                entry.message or ""):
            return int(data.metadata["pid"].value)
    return None


def status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None, run_id
    return run.status


def finished(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus | None:
    current = status(instance, run_id)
    return current if current in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                                  dg.DagsterRunStatus.CANCELED) else None


def retry_of(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun | None:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/parent_run_id": run_id}))
    return runs[0] if runs else None


def kill_run_worker(instance: dg.DagsterInstance, run_id: str) -> None:
    """SIGKILL the run worker and, at the same instant, every process under it: the step
    processes of a multiprocess executor (and its fork server), as when a machine's
    processes die together. A step that outlived its run alone exits within a second
    (``lifeline.die_with``, ``tests/infra/test_lifeline.py``), but a tiny stage can finish in
    less."""
    import psutil

    pid = wait_for(lambda: run_worker_pid(instance, run_id), 60, "run worker pid")
    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    for process in [psutil.Process(pid), *tree] if psutil.pid_exists(pid) else tree:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def recovered_by_retry(instance: dg.DagsterInstance, run_id: str, timeout: float
                       ) -> dg.DagsterRun:
    """After the kill: the run is failed (naming SIGKILL), retried, and the retry succeeds."""
    wait_for(lambda: status(instance, run_id) == dg.DagsterRunStatus.FAILURE, 30,
             "the killed run marked failed")
    messages = [e.message or "" for e in instance.all_logs(run_id)]
    assert any("SIGKILL" in m for m in messages), messages
    retry = wait_for(lambda: retry_of(instance, run_id), 30, "an automatic retry")
    assert retry.tags["dagster/retry_number"] == "1"
    assert retry.tags.get("dagster/is_resume_retry") == "true"  # from failure
    final = wait_for(lambda: finished(instance, retry.run_id), timeout,
                     "the retried run to finish")
    log = "\n".join(e.message or "" for e in instance.all_logs(retry.run_id))
    assert final == dg.DagsterRunStatus.SUCCESS, log[-4000:]
    return retry


def test_killed_run_is_failed_its_gpu_slot_freed_and_the_retry_runs(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE_LOCATION)
    work = tmp_path / "work"
    work.mkdir()
    with deployment(tmp_path, ["--python-file", "probe.py"], {"PROBE_WORK": str(work)},
                    tmp_path) as (instance, launch):
        run_id = launch("hold_gpu_job")
        wait_for(lambda: list((work / "pids").glob("*")) if (work / "pids").is_dir() else None,
                 90, "the gpu step to start")
        kill_run_worker(instance, run_id)
        killed = time.monotonic()
        (work / "release").touch()  # the next attempt may finish
        retry = recovered_by_retry(instance, run_id, timeout=60)
        took = time.monotonic() - killed
        steps = [e.step_key for e in instance.all_logs(
            retry.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)]
        assert steps == ["hold_gpu"]  # it ran the gpu step: it got the slot
        assert took < 60, f"the gpu slot came back after {took:.0f} s"
        assert len(list((work / "pids").glob("*"))) == 2  # the killed attempt and the retry


# --- resume from shards, on the real code location ----------------------------------------

def shards(out: Path, stage: str) -> dict[str, tuple[int, int]]:
    """Shard file name -> (inode, mtime_ns) under the stage's one key folder."""
    found = {}
    for path in (out / "stages" / stage).glob("*/shard-*.parquet"):
        st = path.stat()
        found[path.name] = (st.st_ino, st.st_mtime_ns)
    return found


def reference(profile: Path, names: list[str], out: Path) -> None:
    """An uninterrupted materialisation in this process, with the same definitions."""
    from assets import profile_assets
    from saturated_dag.profiles import load_profile

    assets, _ = profile_assets(load_profile(str(profile)))
    keys = [dg.AssetKey(["chain_sum", n]) for n in names]
    result = dg.materialize(assets, selection=dg.AssetSelection.assets(*keys),
                            resources=make_resources(str(profile), str(out)))
    assert result.success


def check_resumed(log: str, stage: str, before: dict[str, tuple[int, int]],
                  after: dict[str, tuple[int, int]]) -> None:
    match = RESUMED.search(log)
    assert match, log[-4000:]
    status_, name, _key, reused, computed, total = match.groups()
    assert (status_, name) == ("resumed", stage)
    assert int(reused) == len(before) >= 1 and int(computed) == int(total) - len(before) >= 1
    for shard, stamp in before.items():
        assert after[shard] == stamp, f"{shard} was rewritten"
    assert len(after) == int(total)


# The judging stage's settings: the saturated split only (a few questions), two questions per
# shard, so that both stages write several shards; the pool does not depend on them.
RESUME_SCORING = {"correct_splits": ["saturated"], "all_completion_splits": [],
                  "judge_max_new_tokens": 48}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The uninterrupted reference pool and partitions (profile, output folder)."""
    tmp = tmp_path_factory.mktemp("reference")
    profile = write_profile(tmp / "profile.yaml", shard_questions=2, scoring=RESUME_SCORING)
    reference(profile, ["generation_pool", "difficulty_partitions"], tmp / "out")
    return profile, tmp / "out"


# The project's code location plus a job of one asset per stage killed below (``dagster job
# launch`` selects jobs, not assets; its op selection does not load an asset job's upstream
# inputs).
ONE_ASSET_LOCATION = """
import dagster as dg

import definitions

defs = dg.Definitions.merge(definitions.defs, dg.Definitions(jobs=[
    dg.define_asset_job("one_" + key[-1], selection=dg.AssetSelection.assets(key))
    for key in {keys!r}]))
"""
KILLED = ("chain_sum/generation_pool", "chain_sum/self_judge_scores")


def kill_and_resume(instance: dg.DagsterInstance, launch: Callable[..., str], out: Path,
                    select: str) -> None:
    """Launch a run of the asset ``select`` through the daemon, SIGKILL its run worker after
    the stage's first shard, and check that the automatic retry resumes from the shards."""
    stage = select.replace("/", "__")
    run_id = launch("one_" + select.split("/")[-1])
    wait_for(lambda: shards(out, stage) or finished(instance, run_id), 300,
             "the stage's first shard")
    kill_run_worker(instance, run_id)
    before = shards(out, stage)
    assert before, f"the run ended before writing a shard: {status(instance, run_id)}"
    assert not asset_file(out / "assets", select.split("/")).exists()
    retry = recovered_by_retry(instance, run_id, timeout=300)
    log = "\n".join(e.message or "" for e in instance.all_logs(retry.run_id))
    check_resumed(log, select, before, shards(out, stage))


def test_sigkill_mid_stage_resumes_from_shards(tmp_path: Path,
                                               upstream: tuple[Path, Path]) -> None:
    """The generation pool, then the self-judge tournament, each killed after its first
    shard in one deployment (one code server and daemon): each retry reuses the shards on
    disk untouched, computes the rest, and gives the uninterrupted run's table."""
    profile, ref_out = upstream
    judge_ref = tmp_path / "reference"  # the uninterrupted tournament on the same tables
    shutil.copytree(ref_out / "assets", judge_ref / "assets")
    reference(profile, ["self_judge_scores"], judge_ref)
    out = tmp_path / "out"
    env = {"SATURATED_DAG_PROFILE": str(profile), "SATURATED_DAG_OUTPUT_DIR": str(out),
           "HF_HUB_OFFLINE": "1"}
    (tmp_path / "location.py").write_text(ONE_ASSET_LOCATION.format(
        keys=[k.split("/") for k in KILLED]))
    location = ["--python-file", str(tmp_path / "location.py"), "--working-directory",
                str(REPO_ROOT)]
    with deployment(tmp_path, location, env, REPO_ROOT) as (instance, launch):
        kill_and_resume(instance, launch, out, "chain_sum/generation_pool")
        pool = "chain_sum/generation_pool.parquet"
        assert_frame_equal(pl.read_parquet(out / "assets" / pool),
                           pl.read_parquet(ref_out / "assets" / pool))
        for path in (ref_out / "assets").rglob("*"):  # the partitions beside it
            target = out / "assets" / path.relative_to(ref_out / "assets")
            if path.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        kill_and_resume(instance, launch, out, "chain_sum/self_judge_scores")
    for rel in ["assets/chain_sum/self_judge_scores.parquet",
                "chain_sum/self_judge_comparisons.parquet"]:
        assert_frame_equal(pl.read_parquet(out / rel), pl.read_parquet(judge_ref / rel))
