"""A training child dies with the run process that started it and never publishes for a run
that has died (``saturated_dag.infra.lifeline``, ``resources/training_child.py``).

The fault it closes: SIGKILL of the run process alone left the training child running with
parent 1 for about 50 s, and it swapped its adapter in after its run was dead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from saturated_dag.infra.lifeline import ParentGone, require_parent
from tests.conftest import REPO_ROOT as ROOT


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:  # a zombie is dead
        return stat.read().split()[2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_bound_to_its_parent_dies_when_the_parent_is_sigkilled(tmp_path: Path) -> None:
    child = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from saturated_dag.infra.lifeline import bind_to_parent
        bind_to_parent(int(sys.argv[1]))
        open(sys.argv[2], "w").write(str(os.getpid()))
        time.sleep(120)
    """)
    parent = textwrap.dedent(f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {child!r}, str(os.getpid()), sys.argv[1]])
        time.sleep(120)
    """)
    marker = tmp_path / "child.pid"
    run = subprocess.Popen([sys.executable, "-c", parent, str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not marker.is_file() or not marker.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        pid = int(marker.read_text())
        assert _alive(pid)
        os.kill(run.pid, signal.SIGKILL)  # the run process, alone
        run.wait(10)
        deadline = time.monotonic() + 10
        while _alive(pid):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        run.kill()


def test_nothing_is_published_for_a_parent_that_is_gone(tiny_model_dir: Path,
                                                        tmp_path: Path) -> None:
    from saturated_dag.config import TrainingSettings
    from saturated_dag.training.train import train_adapter

    gone = os.getppid() + 1 if os.getppid() + 1 != os.getpid() else os.getppid() + 2
    with pytest.raises(ParentGone, match="is not published"):
        require_parent(gone, "adapter x")
    require_parent(os.getppid(), "adapter x")  # the real parent: fine
    data = pl.DataFrame([{"prompt": "<|user|>1 + 2 =<|end|><|assistant|>",
                          "completion": "3 \\boxed{3}"}] * 2)
    settings = TrainingSettings(epochs=1, batch_size=2, per_device_batch_size=2,
                                learning_rate=5e-2, max_length=64, lora_r=4, lora_alpha=8,
                                lora_dropout=0.0)
    with pytest.raises(ParentGone):
        train_adapter("sft", str(tiny_model_dir), data, settings, tmp_path / "sft",
                      before_publish=lambda: require_parent(gone, "sft"))
    assert not (tmp_path / "sft").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sft")]  # no debris


def test_binding_to_the_live_parent_keeps_running() -> None:
    script = ("import os, sys; sys.path.insert(0, sys.argv[1]);"
              "from saturated_dag.infra.lifeline import bind_to_parent;"
              "print(bind_to_parent(os.getppid()))")
    done = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == ("True" if sys.platform.startswith("linux") else "False")


def test_a_killed_writes_temporary_file_is_swept_by_the_next_write(tmp_path: Path) -> None:
    """SIGKILL during a table write left ``.<name>.<random>.tmp`` beside the outputs for ever."""
    writer = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from saturated_dag.infra.atomic import atomic_write
        def slow(handle):
            handle.write(b"partial")
            handle.flush()
            print("writing", flush=True)
            time.sleep(120)
        atomic_write(sys.argv[1], slow)
    """)
    target = tmp_path / "results_table.csv"
    run = subprocess.Popen([sys.executable, "-c", writer, str(target)], stdout=subprocess.PIPE,
                           text=True)
    try:
        assert run.stdout is not None and run.stdout.readline().strip() == "writing"
        [debris] = list(tmp_path.glob(".*.tmp"))
        assert f".{run.pid}." in debris.name
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
    finally:
        run.kill()
    from saturated_dag.infra.atomic import atomic_write_text

    atomic_write_text(tmp_path / "other.md", "x")  # any later write in the folder sweeps it
    assert not debris.exists() and not list(tmp_path.glob(".*.tmp"))
    assert not target.exists()


def test_pipes_files_live_in_the_trainings_work_folder(tmp_path: Path) -> None:
    """Pipes' context and message files were temporary folders in the system's temp folder,
    left there by a SIGKILLed run; now they are in the training's work folder, which the
    adapter's next training clears."""
    from resources.training import training_client

    client = training_client(tmp_path / "work")
    assert Path(client.context_injector._path).parent == tmp_path / "work"
    assert Path(client.message_reader._path).parent == tmp_path / "work"


def _watching_step(run_pid: int, tmp_path: Path) -> subprocess.Popen:
    """A step process that watches ``run_pid`` (``die_with``, polled every 0.1 s), returned
    once it is watching and alive."""
    step = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from saturated_dag.infra.lifeline import die_with
        die_with({run_pid}, interval=0.1)
        open({str(tmp_path / "watching")!r}, "w").close()
        time.sleep(60)
    """)])
    deadline = time.monotonic() + 30
    while not (tmp_path / "watching").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(step.pid)
    return step


def test_a_step_process_exits_soon_after_its_run_process_is_killed(tmp_path: Path) -> None:
    """``die_with``: a process that is not the run's child (a step forked by the executor's
    fork server) exits within its poll interval of the run process's SIGKILL."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    step = _watching_step(run.pid, tmp_path)
    try:
        run.kill()
        run.wait()
        assert step.wait(timeout=5) == 1  # gone, with a code that says it did not finish
    finally:
        for process in (run, step):
            if process.poll() is None:
                process.kill()


def wait_then_train(request: object, tag: str) -> dict:
    """A side-by-side worker's training that says it has started (a file named by its pid
    beside the adapters) and waits for ``go`` before training and publishing as every
    worker does (``runner.train_in_worker``), so the test kills the run in between."""
    from saturated_dag.training.runner import train_in_worker

    grid = Path(request.out_dir).parents[1]  # type: ignore[attr-defined]
    (grid / f"worker-{os.getpid()}").write_text("")
    while not (grid / "go").exists():
        time.sleep(0.05)
    return train_in_worker(request, tag)  # type: ignore[arg-type]


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")
def test_a_zombie_runs_side_by_side_workers_die_and_publish_nothing(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Issue 46: the run process SIGKILLed but not reaped (a zombie, as under a supervising
    shell): its side-by-side training workers used to see it alive (``kill(pid, 0)``
    succeeds on a zombie) and published both adapters. Now they die with it, and nothing is
    published."""
    grid = tmp_path / "grid"
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from saturated_dag.training.runner import SideBySide, run_trainings
        from tests.training.test_adapter_partitions import _keyed, _sft_requests
        from tests.infra.test_lifeline import wait_then_train
        requests = _keyed(_sft_requests(Path({str(grid)!r}), Path({str(tiny_model_dir)!r})))
        run_trainings(requests, SideBySide(2, train=wait_then_train))
    """)])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while len(workers) < 2:
            assert run.poll() is None and time.monotonic() < deadline, "workers never started"
            time.sleep(0.1)
            workers = [int(p.name.split("-")[1]) for p in grid.glob("worker-*")]
        assert all(_alive(pid) for pid in workers)
        os.kill(run.pid, signal.SIGKILL)  # and not reaped: run.wait() only at the end
        deadline = time.monotonic() + 10
        while not _zombie(run.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (grid / "go").write_text("")  # the workers may train and publish now, if alive
        published = [grid / name / "key" for name in ("a", "b")]
        deadline = time.monotonic() + 180
        while (any(_alive(pid) for pid in workers) and not any(p.exists() for p in published)
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert not [p for p in published if p.exists()], "published for a dead run"
        assert not any(_alive(pid) for pid in workers), "a worker outlived its zombie run"
        assert _zombie(run.pid)  # the run was a zombie throughout
    finally:
        for pid in workers:  # this test's own workers, by pid, if they outlived the test
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        run.kill()
        run.wait()


def test_a_watcher_counts_a_zombie_as_dead(tmp_path: Path) -> None:
    """``die_with`` polled ``kill(pid, 0)``, which succeeds on a zombie: a step process
    watching a run process killed but not reaped went on. Now it exits within its poll."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    step = _watching_step(run.pid, tmp_path)
    try:
        os.kill(run.pid, signal.SIGKILL)  # not reaped: a zombie
        deadline = time.monotonic() + 10
        while not _zombie(run.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert step.wait(timeout=5) == 1  # gone, with a code that says it did not finish
    finally:
        for process in (run, step):
            if process.poll() is None:
                process.kill()
        run.wait()


def test_a_pid_given_to_another_process_is_not_the_process_watched() -> None:
    """A parent's pid reused by a later process is not that parent: its start time differs."""
    from saturated_dag.infra.lifeline import process_alive, start_time

    me = os.getpid()
    started = start_time(me)
    assert started is not None and process_alive(me, started)
    assert not process_alive(me, started + 1)
