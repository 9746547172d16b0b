"""A cell's grid trained side by side on a CPU: one forked process per core, one torch thread
each.

Why: on the embedded model a training is bound by Python and small matrix products, so a
second torch thread in the same process adds little, while a second process training another
adapter of the grid doubles what the two cores do (``BENCHMARKS.md``, "Training side by
side"). Dagster's multiprocess executor would give the same overlap across steps, but it
starts a process per step, which costs more than the demo's short steps last
(``docs/performance.md``). Here the workers are started once per process that trains (a few
seconds, the two importing torch, TRL and PEFT at once on their two cores: ``PRELOAD``) and
then serve every grid of its steps, warm. They are spawned, not forked: polars' thread pools
do not survive a fork (a child forked from a process that had used polars hung in
``read_parquet``), and multiprocessing's fork server is one per process, preloaded and given
its environment by whoever starts it first (Dagster's multiprocess executor under
``one_per_core``).

Each worker runs one torch thread (``parallel.limit_threads``), so nothing oversubscribes, and
an adapter's weights do not depend on how many cores the machine has or which worker trained
it. Each adapter is published, with its ``result.json``, as soon as its training ends. A
training that raises lets the others finish, then fails the step. A worker that dies (the
OOM killer) stops the others: the adapters already published stay, the step fails naming
those that are not, and its re-execution trains only those (the rest are cache hits). A
worker is bound to the process that started it as the Pipes training child is
(``lifeline.bind_worker``: the kernel's parent-death signal, and a watcher that counts a
zombie or a changed parent pid as dead), and checks that process once more right before it
publishes an adapter, so a run killed but not yet reaped gets no adapter published for it.
Log lines travel
back through a queue, so the run log shows each training's progress as before, prefixed by
its adapter.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from saturated_dag.training.job import TrainingJob

LogFn = Callable[[str], None]

PRELOAD = ["saturated_dag.training.isolated", "saturated_dag.training.train",
           "saturated_dag.training.rrhf_trainer", "saturated_dag.evaluation",
           "saturated_dag.generation.transformers_backend", "saturated_dag.generation.models",
           "saturated_dag.tasks", "trl.trainer.dpo_trainer", "trl.trainer.sft_trainer", "peft"]
"""What each worker imports when it starts, before its first training."""

_WORKER: dict[str, Any] = {}
"""The worker process's state: the queue its log lines go to, and the pid of the process
that started it (the run's), checked before each publication."""

_POOLS: dict[int, tuple[ProcessPoolExecutor, Any, threading.Thread]] = {}
"""This process's worker pools by size, each with its log queue and the thread that started
it: started by the first grid, kept for the next (a worker's imports, allocator and kernels
stay warm), and ended when the process exits or a worker dies. The kernel's parent-death
signal fires when the starting thread ends, so a pool whose thread has ended is replaced."""


def _start_worker(lines: Any, owner: int) -> None:
    """In each worker: one torch thread, bound to the process that owns the pool (the run's)
    as the Pipes training child is (``lifeline.bind_worker``), and the imports."""
    import importlib

    from saturated_dag.lifeline import bind_worker
    from saturated_dag.parallel import limit_threads

    bind_worker(owner)
    limit_threads(1)
    for module in PRELOAD:
        importlib.import_module(module)
    _WORKER["lines"] = lines
    _WORKER["owner"] = owner


def train_in_worker(job: TrainingJob, tag: str) -> dict[str, Any]:
    """Train ``job`` in this worker; its log lines go to the parent, named by its adapter,
    then ``(tag, None)`` to say they are all sent. The record ``train_job`` returns, with
    where it was trained (``worker``: process, torch threads, monotonic start and end),
    which is not written to ``result.json``. The base model is read from disk for each
    training (milliseconds, once the worker is warm), so a base model rewritten on disk
    between two steps is never served stale. Right before the adapter is published, the
    process that asked for it must still be alive (``lifeline.require_parent``)."""
    import torch

    from saturated_dag.lifeline import require_parent
    from saturated_dag.training.isolated import train_job

    name = Path(job.out_dir).parent.name
    lines, owner = _WORKER["lines"], _WORKER["owner"]
    start = time.monotonic()
    try:
        record = train_job(job, log=lambda line: lines.put((tag, f"{name}: {line}")),
                           before_publish=lambda: require_parent(owner, job.out_dir))
    finally:
        lines.put((tag, None))
    return {**record, "worker": {"pid": os.getpid(), "torch_threads": torch.get_num_threads(),
                                 "start": start, "end": time.monotonic()}}


def _pool(count: int) -> tuple[ProcessPoolExecutor, Any]:
    """The pool of ``count`` one-thread workers, started on first use (again when the thread
    that started it has ended: its workers' parent-death signal has fired)."""
    if count in _POOLS and not _POOLS[count][2].is_alive():
        _discard(count)
    if count not in _POOLS:
        context = multiprocessing.get_context("spawn")
        lines = context.Queue()
        _POOLS[count] = (ProcessPoolExecutor(count, mp_context=context,
                                             initializer=_start_worker,
                                             initargs=(lines, os.getpid())), lines,
                         threading.current_thread())
    pool, lines, _ = _POOLS[count]
    return pool, lines


def _discard(count: int) -> None:
    """End the pool of ``count`` workers (one died, or the step was interrupted)."""
    pool, _, _ = _POOLS.pop(count, (None, None, None))
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def train_side_by_side(jobs: list[TrainingJob], workers: int, log: LogFn | None = None,
                       train: Callable[[TrainingJob, str], dict[str, Any]] = train_in_worker,
                       ) -> list[dict[str, Any]]:
    """Train ``jobs`` over ``workers`` processes (one torch thread each); what ``train``
    (a module-level function, run in a worker) returns for each, in ``jobs``' order.

    Every training runs to its end, even when another fails, so each finished adapter is
    published; then the first failure is raised as it was, with a note naming its adapter
    and the others that failed."""
    say = log or (lambda _line: None)
    count = max(1, min(workers, len(jobs)))
    pool, lines = _pool(count)
    say(f"training {len(jobs)} adapters side by side in {count} processes, one torch "
        "thread each")
    step = f"{os.getpid()}-{time.monotonic_ns()}"
    tags = {f"{step}-{i}": i for i in range(len(jobs))}
    records: dict[int, dict[str, Any]] = {}
    errors: dict[int, BaseException] = {}
    sent: set[str] = set()
    try:
        futures = {pool.submit(train, job, tag): i
                   for (tag, i), job in zip(tags.items(), jobs, strict=True)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(lines, say, tags, sent)
            for future in done:
                try:
                    records[futures[future]] = future.result()
                except BrokenProcessPool:
                    raise
                except Exception as err:  # raised below, once the others have finished
                    errors[futures[future]] = err
    except BrokenProcessPool as err:
        _discard(count)
        missing = [jobs[i].out_dir for i in range(len(jobs)) if i not in records]
        raise RuntimeError(f"a training process died (killed, or out of memory); "
                           f"not trained: {', '.join(missing)}") from err
    except BaseException:
        _discard(count)
        raise
    _drain(lines, say, tags, sent, until_all_sent=True)
    if errors:  # the training's own error (its type and message), named
        first = min(errors)
        error = errors[first]
        error.add_note(f"training {jobs[first].out_dir} side by side"
                       + (f"; {len(errors) - 1} more of this step failed too: "
                          + ", ".join(jobs[i].out_dir for i in sorted(errors)[1:])
                          if len(errors) > 1 else ""))
        raise error
    return [records[i] for i in range(len(jobs))]


def _drain(lines: Any, say: LogFn, tags: dict[str, int], sent: set[str],
           until_all_sent: bool = False) -> None:
    """Log the lines the workers have sent for this step's trainings (``tags``), noting in
    ``sent`` each training that has said it sent all; with ``until_all_sent``, wait (10 s at
    most) until every one has. Lines of an earlier, interrupted step are dropped."""
    deadline = time.monotonic() + 10
    while True:
        try:
            tag, line = lines.get(timeout=0.05) if until_all_sent else lines.get_nowait()
        except queue.Empty:
            if not until_all_sent or len(sent) == len(tags) or time.monotonic() > deadline:
                return
            continue
        if tag not in tags:
            continue
        if line is None:
            sent.add(tag)
        else:
            say(line)
