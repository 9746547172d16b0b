"""A waiting run says why and costs nothing (issue 15, item 2).

Before: a step blocked by the ``gpu`` pool logged only ``Step blocked by limit for pool gpu``
while its process spun a full core (Dagster's claim check never slept), and a config error such
as ``sampling.n: 0`` surfaced only inside the first ``gpu`` step, after the wait.

Each test runs the waiting run in its own process against an on-disk instance whose ``gpu``
slot is held by another run, as after a SIGKILL with no daemon to free it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from resources import pool_wait
from tests.conftest import REPO_ROOT

CHILD = textwrap.dedent("""
    import sys
    import dagster as dg
    from resources import make_resources  # building them installs resources.pool_wait

    mode, out = sys.argv[1], sys.argv[2]

    @dg.asset(pool="gpu")
    def gpu_step() -> None:
        print("gpu step ran", flush=True)

    if mode == "wait":
        defs = dg.Definitions(assets=[gpu_step], executor=dg.in_process_executor,
                              resources=make_resources("ci", out))
        selection = None
    else:  # a real gpu asset of the ci profile with a bad override
        from assets import profile_assets
        from saturated_dag.profiles import load_profile
        assets, _ = profile_assets(load_profile("ci"))
        defs = dg.Definitions(assets=assets, executor=dg.in_process_executor,
                              resources=make_resources("ci", out, {"sampling": {"n": 0}}))
        selection = [dg.AssetKey(["chain_sum", "generation_pool"])]
    job = defs.resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(instance=instance, asset_selection=selection,
                                        raise_on_error=False)
        print("run", result.run_id, "success" if result.success else "failure", flush=True)
""")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    return home


@dg.op
def noop() -> None:
    pass


@dg.job
def earlier() -> None:
    noop()


def _finished_holder(instance: dg.DagsterInstance) -> str:
    """A run that ended (as a SIGKILLed one is marked) and still holds the gpu slot."""
    run_id = earlier.execute_in_process(instance=instance).run_id
    instance.event_log_storage.set_concurrency_slots("gpu", 1)
    claim = instance.event_log_storage.claim_concurrency_slot("gpu", run_id, "train_step", 0)
    assert claim.is_claimed
    return run_id


def _child(home: Path, mode: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode, str(out)], cwd=REPO_ROOT,
                            env={**os.environ, "DAGSTER_HOME": str(home)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _blocked_messages(instance: dg.DagsterInstance, holder: str) -> list[str]:
    records = instance.get_run_records()
    messages = []
    for record in records:
        if record.dagster_run.run_id == holder:
            continue
        messages += [e.message for e in instance.all_logs(record.dagster_run.run_id)
                     if "blocked by limit" in (e.message or "")]
    return messages


def test_blocked_step_names_the_holder_sleeps_and_runs_once_freed(
        home: Path, tmp_path: Path) -> None:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        holder = _finished_holder(instance)
        child = _child(home, "wait", tmp_path / "out")
        try:
            deadline = time.time() + 120
            while not (messages := _blocked_messages(instance, holder)):
                assert child.poll() is None, child.communicate()[0][-3000:]
                assert time.time() < deadline, "the step never reported that it was blocked"
                time.sleep(0.5)
            (message,) = messages
            assert message.startswith("Step blocked by limit for pool gpu: pool 'gpu' has 1 slot")
            assert f"run {holder} (step train_step), which ended SUCCESS" in message
            assert f"{pool_wait.FREE_COMMAND} {holder}" in message

            time.sleep(2)  # past the first claim checks, into the steady wait
            process = psutil.Process(child.pid)
            before, start = sum(process.cpu_times()[:2]), time.monotonic()
            time.sleep(6)
            used = sum(process.cpu_times()[:2]) - before
            elapsed = time.monotonic() - start
            # a busy wait uses ~1 s of CPU per second; sleeping between checks, a few percent
            assert used < 0.25 * elapsed, f"the blocked run used {used:.1f} s CPU in " \
                f"{elapsed:.1f} s"

            freed = subprocess.run([sys.executable, "-m", "resources.pool_wait", "free", holder],
                                   cwd=REPO_ROOT, env={**os.environ, "DAGSTER_HOME": str(home)},
                                   capture_output=True, text=True, timeout=120)
            assert freed.returncode == 0, freed.stderr
            assert f"freed the pool slots of run {holder}, which is SUCCESS" in freed.stdout
            output, _ = child.communicate(timeout=120)
        finally:
            child.kill()
    assert "gpu step ran" in output and " success" in output


def test_a_config_error_fails_the_run_before_it_waits_for_the_pool(
        home: Path, tmp_path: Path) -> None:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        holder = _finished_holder(instance)
        child = _child(home, "bad_config", tmp_path / "out")
        try:
            output, _ = child.communicate(timeout=120)
        finally:
            child.kill()
        assert " failure" in output, output[-3000:]
        assert "sampling.n" in output
        assert _blocked_messages(instance, holder) == []


def test_free_refuses_a_run_still_in_progress_unless_its_process_is_gone(
        home: Path) -> None:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.create_run_for_job(earlier)  # created, never finished: as if killed
        instance.event_log_storage.set_concurrency_slots("gpu", 1)
        assert instance.event_log_storage.claim_concurrency_slot(
            "gpu", run.run_id, "train_step", 0).is_claimed
        with pytest.raises(ValueError, match="pass --dead"):
            pool_wait.free(instance, run.run_id)
        assert instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
        assert "which is FAILURE" in pool_wait.free(instance, run.run_id, dead=True)
        assert instance.event_log_storage.get_concurrency_info("gpu").claimed_slots == []


def test_the_corrections_apply_to_this_dagster(tmp_path: Path) -> None:
    """If a Dagster upgrade changed either function, re-check whether it is still needed.
    Importing ``resources`` installs nothing; building the resources does."""
    import subprocess
    import sys

    assert dg.__version__.startswith("1.13."), dg.__version__  # the versions it corrects
    probe = ("import resources; from resources import pool_wait; print(pool_wait._installed()); "
             f"resources.make_resources('ci', {str(tmp_path)!r}); print(pool_wait._installed())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=REPO_ROOT, check=True).stdout.split("\n")
    assert out[:2] == ["(False, False)", "(True, True)"]
    assert pool_wait.install() == (True, True)


def test_pools_are_claimed_per_step_because_job_execute_bypasses_the_run_queue() -> None:
    """Why this project keeps op-granularity pools and the corrections above, rather than
    Dagster's run-granularity pools (``concurrency.pools.granularity: run``), which would skip
    step claims and so never hit the busy wait: run granularity limits only runs that pass
    through the run queue (``instance.submit_run``: the UI, schedules, sensors,
    ``dagster job launch``). ``dagster job execute``, which README's command, the run scripts
    and CI use, executes in the calling process (``execute_job``) and never meets the queue,
    so two such runs would share the accelerator unchecked. Pinned to the Dagster it was read
    from: re-check both facts on an upgrade."""
    import importlib.metadata
    import inspect

    import yaml
    from dagster._cli.job import do_execute_command

    assert importlib.metadata.version("dagster") == "1.13.27"
    source = inspect.getsource(do_execute_command)
    assert "execute_job(" in source and "submit_run" not in source
    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    assert config["concurrency"]["pools"].get("granularity", "op") == "op"
