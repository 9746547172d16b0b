"""The one runner of trainings: a list of ``TrainingRequest``s trained under a policy, in this
process or side by side on the cores. Every policy trains each request with ``train_request``
and shares three rules:

- **publish**: the adapter with its kept epoch's validation results and completions by one
  rename (``train.train_adapter``), then ``result.json`` last: a folder with a ``result.json``
  is whole, and a cache hit trusts nothing less;
- **lifeline**: a training that runs for another process (``owner``) dies with it
  (``bind_to_owner``) and checks it again right before it publishes, so a dead run gets no
  adapter;
- **threads**: on a CPU every training runs one torch thread, so an adapter's weights depend
  neither on the cores nor on how many adapters its step trains.

``InThisProcess`` trains one after another with one load of each base model (a GPU's cells, the
Pipes child ``resources/training_child.py``). ``SideBySide`` trains a CPU's cell in spawned
one-thread worker processes, one per core, started once and kept warm (spawned: polars' threads
do not survive a fork); a training that raises lets the others finish, a worker that dies fails
the step naming what is not trained (``BENCHMARKS.md``, "Training side by side";
``docs/performance.md``). Without Dagster: ``python -m saturated_dag.training.runner JOB.json
RESULT.json`` trains one request and writes its result record.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saturated_dag.infra.log import LogFn, time_left
from saturated_dag.training.folders import ADAPTER_WEIGHTS, RESULT_FILE
from saturated_dag.training.request import TrainingRequest

if TYPE_CHECKING:
    from saturated_dag.evaluation.validation import EpochValidator
    from saturated_dag.training.train import BaseModels

Record = dict[str, Any]
"""A training's result record: ``TrainResult``'s fields, ``weights_version``, ``cache_key``
(what ``result.json`` holds)."""
WorkerTrain = Callable[[TrainingRequest, str], Record]
"""What a side-by-side worker runs for one request and its tag (``train_in_worker``)."""


@dataclass(frozen=True)
class InThisProcess:
    """Train the requests one after another in the calling process, with one load of each base
    model.

    ``owner``: the process these trainings run for, when it is not this one (the Pipes
    child's run process); this process must already be bound to it (``bind_to_owner``), and
    each adapter is published only while it lives. ``bases``: where the base models come
    from (the caller's, to count the loads); a fresh ``BaseModels`` when None. ``around``:
    what each training runs inside (the Pipes child records it in its residency log and writes
    a failure's traceback to its log file)."""

    owner: int | None = None
    bases: BaseModels | None = field(default=None, compare=False)
    around: Callable[[TrainingRequest], AbstractContextManager[Any]] | None = None


@dataclass(frozen=True)
class SideBySide:
    """Train the requests side by side in ``workers`` one-thread worker processes (at most one per
    request), bound to this process. ``train`` is what a worker runs for one request
    (``train_in_worker`` when None; tests pass a stand-in)."""

    workers: int
    train: WorkerTrain | None = None


Policy = InThisProcess | SideBySide


def one_torch_thread(requests: list[TrainingRequest]) -> bool:
    """Whether every training of ``requests`` runs one torch thread: on a CPU (their
    ``workers`` > 0, ``parallel.training_workers``), wherever it runs; on an accelerator,
    torch's own threads."""
    return bool(requests) and requests[0].workers > 0


def policy_for(requests: list[TrainingRequest]) -> Policy:
    """How the run's own process trains ``requests``: side by side in their ``workers``
    processes when that is several (a CPU with several cores, ``parallel.training_workers``)
    and there are several requests, else in this process."""
    workers = requests[0].workers if requests else 0
    if workers > 1 and len(requests) > 1:
        return SideBySide(workers)
    return InThisProcess()


def run_trainings(requests: list[TrainingRequest], policy: Policy, log: LogFn | None = None
             ) -> list[Record]:
    """Train ``requests`` under ``policy``; their result records, in ``requests``' order. Each
    adapter is published, with its ``result.json``, as soon as its training ends, whatever
    happens to the trainings after it."""
    if not requests:
        return []
    if isinstance(policy, SideBySide):
        return _side_by_side(requests, policy, log)
    from saturated_dag.infra.parallel import torch_threads
    from saturated_dag.training.train import BaseModels

    bases = policy.bases if policy.bases is not None else BaseModels()
    records = []
    started = time.monotonic()
    with torch_threads(1 if one_torch_thread(requests) else None):
        for index, request in enumerate(requests, 1):
            if log is not None and len(requests) > 1:
                left = time_left(time.monotonic() - started, index - 1, len(requests))
                log(f"adapter {index} of {len(requests)} ({left} for this step): {request.out_dir}")
            with policy.around(request) if policy.around is not None else nullcontext():
                records.append(train_request(request, validator_for(request), log=log,
                                             owner=policy.owner, bases=bases))
    return records


def bind_to_owner(owner: int, one_thread: bool) -> None:
    """Make this process one that trains for ``owner`` (a side-by-side worker, the Pipes
    child): it dies with ``owner`` (``lifeline.bind_worker``), and with ``one_thread`` (on a
    CPU: ``one_torch_thread``) runs one torch thread, as every training on a CPU does."""
    from saturated_dag.infra.lifeline import bind_worker
    from saturated_dag.infra.parallel import limit_threads

    bind_worker(owner)
    if one_thread:
        limit_threads(1)


def validator_for(request: TrainingRequest) -> EpochValidator:
    """How each epoch of ``request``'s training is judged: its validation questions, sampled
    and checked as the request says (``evaluation.validation.EpochValidator``)."""
    from saturated_dag.evaluation.validation import EpochValidator

    return EpochValidator(request.validation, request.sampling.params(), request.answer_check,
                          request.batch_size, request.chat_template, request.enable_thinking)


def train_request(request: TrainingRequest, validator: EpochValidator, log: LogFn | None = None,
                  owner: int | None = None, bases: BaseModels | None = None) -> Record:
    """Train the adapter ``request`` describes in this process and publish it by the publish rule:
    the adapter with its kept epoch's per-question validation results (``validator`` wrote
    them into the epoch's snapshot), then its ``result.json`` last, so a trained adapter is
    whole, and reusable, the moment its training ends. Returns the ``result.json`` record, so
    no caller reads the file back or hashes the weights again.

    ``request.data`` is the training set's Parquet file, read as a polars frame; the trainer is
    built from ``request.training``, the cell's validated training settings. ``validator``
    judges each epoch (``validator_for(request)``, which every policy passes). ``owner``: the
    process this training runs for, which must be alive right before the adapter is published
    (``lifeline.require_parent``). ``bases`` (``train.BaseModels``) shares one base-model
    load among several trainings."""
    from saturated_dag.infra.atomic import read_proven_parquet
    from saturated_dag.infra.lifeline import require_parent
    from saturated_dag.training.train import train_adapter

    def before_publish() -> None:
        if owner is not None:
            require_parent(owner, request.out_dir)

    with environment(request.tracking_env):  # the MLflow callback's store and tags
        data = read_proven_parquet(request.data, "re-materialise the training set's asset")
        result = train_adapter(request.method, request.base_model, data,
                               request.training, request.out_dir, eval_fn=validator,
                               log=log, record=request.record, before_publish=before_publish,
                               report_to=request.report_to, bases=bases)
    return write_result(Path(result.adapter_dir), asdict(result),
                        request.record.get("cache_key"))


def write_result(folder: Path, record: dict[str, Any], cache_key: str | None) -> Record:
    """``folder/result.json``: the training's record, its weights' hash and its cache key."""
    from saturated_dag.infra.atomic import atomic_write_text
    from saturated_dag.infra.shards import file_fingerprint

    written = {**record, "weights_version": file_fingerprint(folder / ADAPTER_WEIGHTS),
               "cache_key": cache_key}
    atomic_write_text(folder / RESULT_FILE, json.dumps(written, default=float))
    return written


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` set in ``os.environ`` for the block, then the environment's tracking
    variables restored: training in the run's own process (``training.isolate: false``) must
    not leave one adapter's tags, or the experiment id MLflow itself exports, behind for the
    next."""
    def tracked() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in variables or "MLFLOW" in k}

    saved = tracked()
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in tracked():
            if name not in saved:
                del os.environ[name]
        os.environ.update(saved)


# --- side by side: one spawned, one-thread worker process per core ------------------------

PRELOAD = ["saturated_dag.training.runner", "saturated_dag.training.train",
           "saturated_dag.training.rrhf_trainer", "saturated_dag.evaluation.reports",
           "saturated_dag.evaluation.validation",
           "saturated_dag.generation.transformers_backend", "saturated_dag.generation.models",
           "saturated_dag.tasks", "trl.trainer.dpo_trainer", "trl.trainer.sft_trainer", "peft"]
"""What each worker imports when it starts, before its first training."""

_WORKER: dict[str, Any] = {}
"""The worker process's state: the queue its log lines go to, and the pid of the process
that started it (its owner, the run's), checked before each publication."""

_WORKERS: dict[int, tuple[ProcessPoolExecutor, Any, threading.Thread]] = {}
"""This process's sets of side-by-side workers by their count, each with its log queue and
the thread that started it: started by the first adapter step, kept for the next (a worker's
imports, allocator and kernels stay warm), and ended when the process exits or a worker dies.
The kernel's parent-death signal fires when the starting thread ends, so workers whose
starting thread has ended are replaced."""


def _start_worker(lines: Any, owner: int) -> None:
    """In each worker: bound to the process that owns the workers (the run's) and one torch
    thread (``bind_to_owner``), then the imports."""
    import importlib

    bind_to_owner(owner, one_thread=True)
    for module in PRELOAD:
        importlib.import_module(module)
    _WORKER["lines"] = lines
    _WORKER["owner"] = owner


def train_in_worker(request: TrainingRequest, tag: str) -> Record:
    """Train ``request`` in this worker (``train_request``, with the workers' owner); its log
    lines go to the parent, named by its adapter, then ``(tag, None)`` to say they are all sent. The
    record ``train_request`` returns, with where it was trained (``worker``: process, torch
    threads, monotonic start and end), which is not written to ``result.json``. The base
    model is read from disk for each training (milliseconds, once the worker is warm), so a
    base model rewritten on disk between two steps is never served stale."""
    import torch

    name = Path(request.out_dir).parent.name
    lines, owner = _WORKER["lines"], _WORKER["owner"]
    start = time.monotonic()
    try:
        record = train_request(request, validator_for(request),
                               log=lambda line: lines.put((tag, f"{name}: {line}")), owner=owner)
    finally:
        lines.put((tag, None))
    return {**record, "worker": {"pid": os.getpid(), "torch_threads": torch.get_num_threads(),
                                 "start": start, "end": time.monotonic()}}


def _workers(count: int) -> tuple[ProcessPoolExecutor, Any]:
    """The ``count`` one-thread workers and their log queue, started on first use (again when
    the thread that started them has ended: their parent-death signal has fired)."""
    if count in _WORKERS and not _WORKERS[count][2].is_alive():
        _discard(count)
    if count not in _WORKERS:
        context = multiprocessing.get_context("spawn")
        lines = context.Queue()
        _WORKERS[count] = (ProcessPoolExecutor(count, mp_context=context,
                                               initializer=_start_worker,
                                               initargs=(lines, os.getpid())), lines,
                           threading.current_thread())
    workers, lines, _ = _WORKERS[count]
    return workers, lines


def _discard(count: int) -> None:
    """End the ``count`` workers (one died, or the step was interrupted)."""
    workers, _, _ = _WORKERS.pop(count, (None, None, None))
    if workers is not None:
        workers.shutdown(wait=False, cancel_futures=True)


def _side_by_side(requests: list[TrainingRequest], policy: SideBySide, log: LogFn | None
                  ) -> list[Record]:
    """Train ``requests`` over ``policy.workers`` processes (one torch thread each); what its
    ``train`` returns for each, in ``requests``' order.

    Every training runs to its end, even when another fails, so each finished adapter is
    published; then the first failure is raised as it was, with a note naming its adapter
    and the others that failed."""
    train = policy.train or train_in_worker
    say = log or (lambda _line: None)
    count = max(1, min(policy.workers, len(requests)))
    workers, lines = _workers(count)
    say(f"training {len(requests)} adapters side by side in {count} processes, one torch "
        "thread each")

    began = time.monotonic()
    step = f"{os.getpid()}-{time.monotonic_ns()}"
    tags = {f"{step}-{i}": i for i in range(len(requests))}
    records: dict[int, Record] = {}
    errors: dict[int, BaseException] = {}
    sent: set[str] = set()
    try:
        futures = {workers.submit(train, request, tag): i
                   for (tag, i), request in zip(tags.items(), requests, strict=True)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(lines, say, tags, sent)
            for future in done:
                finished = len(records) + len(errors) + 1
                left = time_left(time.monotonic() - began, finished, len(requests))
                say(f"{finished} of {len(requests)} adapters done ({left} for this step)")
                try:
                    records[futures[future]] = future.result()
                except BrokenProcessPool:
                    raise
                except Exception as err:  # raised below, once the others have finished
                    errors[futures[future]] = err
    except BrokenProcessPool as err:
        _discard(count)
        missing = [requests[i].out_dir for i in range(len(requests)) if i not in records]
        raise RuntimeError(f"a training process died (killed, or out of memory); "
                           f"not trained: {', '.join(missing)}") from err
    except BaseException:
        _discard(count)
        raise
    _drain(lines, say, tags, sent, until_all_sent=True)
    if errors:  # the training's own error (its type and message), named
        first = min(errors)
        error = errors[first]
        error.add_note(f"training {requests[first].out_dir} side by side"
                       + (f"; {len(errors) - 1} more of this step failed too: "
                          + ", ".join(requests[i].out_dir for i in sorted(errors)[1:])
                          if len(errors) > 1 else ""))
        raise error
    return [records[i] for i in range(len(requests))]


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


def _main(request_path: str, result_path: str) -> None:
    from saturated_dag.infra.atomic import atomic_write_text

    request = TrainingRequest.from_json(Path(request_path).read_text(), request_path)
    [record] = run_trainings([request], InThisProcess(),
                             log=lambda m: print(f"[train] {m}", flush=True))
    atomic_write_text(Path(result_path), json.dumps(record, default=float))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m saturated_dag.training.runner JOB.json RESULT.json")
    _main(sys.argv[1], sys.argv[2])
