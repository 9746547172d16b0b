"""A step waiting for the gpu concurrency limit says who holds the slot and waits without
spinning (docs/reliability.md).

Two defects of Dagster 1.13 (checked up to 1.13.29) when a step is blocked by a pool limit:

* **Busy wait.** ``InstanceConcurrencyContext.interval_to_next_pending_claim_check`` returns
  ``min([0, *intervals])``, never positive, so the executor's ``sleep_til_ready`` never sleeps
  and a blocked run spins a full core polling the instance's database (dagster-io/dagster#20367
  was closed unmerged). ``install`` replaces it with the intended ``max(0, min(intervals))``:
  the step sleeps until its next claim check (1 s, backing off to 15 s, Dagster's schedule).
* **A silent wait.** The engine event says only ``Step blocked by limit for pool gpu``.
  ``install`` adds which run and step hold the slots, whether that run has finished, and how
  the slot is freed: by run monitoring when the daemon runs (dagster.yaml,
  ``free_slots_after_run_end_seconds``), or with ``python -m resources.pool_wait free RUN_ID``
  (``--dead`` for a run whose process is gone but which still says STARTED).

``resources.make_resources`` installs both (importing a module installs nothing), and only over
the exact Dagster code they correct: if an upgrade changes either function, it is left alone
and ``tests/infra/test_pool_wait.py`` says so. This is the project's one module that imports from
``dagster._``: the two functions it corrects have no public hook.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Sequence

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType, EngineEventData
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

FREE_COMMAND = "python -m resources.pool_wait free"
_BUSY_WAIT_SOURCE = "return min([0, *[ready_at - now for ready_at in self._pending_timeouts"
_BLOCKED_SOURCE = ('f"Step blocked by limit for pool {concurrency_key}"',
                   "event_type=DagsterEventType.ENGINE_EVENT",
                   'metadata={"pool": MetadataValue.pool(concurrency_key)}')


def _interval_to_next_pending_claim_check(self: InstanceConcurrencyContext) -> float:
    """Seconds until the earliest pending claim may be retried (0 when one is due)."""
    if not self._pending_claims or not self._pending_timeouts:
        return 0.0
    now = time.time()
    return max(0.0, min(ready_at - now for ready_at in self._pending_timeouts.values()))


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def holders(instance: dg.DagsterInstance, pool: str, waiting_run: str | None = None) -> str:
    """Who holds ``pool``'s slots and how each is freed, in one sentence per holder."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    held = [slot for slot in info.claimed_slots if slot.run_id != waiting_run]
    limit = info.slot_count
    if not held:
        return (f"pool {pool!r} has {limit} slot(s), none held by another run now; the step "
                "takes one at its next check")
    parts = [f"pool {pool!r} has {limit} slot(s), held by"]
    now = time.time()
    for slot in held:
        record = instance.get_run_record_by_id(slot.run_id)
        if record is None:
            parts.append(f"run {slot.run_id} (step {slot.step_key}), which no longer exists: "
                         f"free it with `{FREE_COMMAND} {slot.run_id}`")
            continue
        status = record.dagster_run.status
        if record.dagster_run.is_finished:
            ended = _ago(now - record.end_time) if record.end_time else "some time"
            parts.append(
                f"run {slot.run_id} (step {slot.step_key}), which ended {status.value} {ended} "
                "ago: run monitoring frees a finished run's slots when the daemon runs "
                "(`dagster dev` or `dagster-daemon run`, dagster.yaml "
                "run_monitoring.free_slots_after_run_end_seconds); to free it now, "
                f"`{FREE_COMMAND} {slot.run_id}`")
        else:
            parts.append(
                f"run {slot.run_id} (step {slot.step_key}), which is {status.value}: the slot "
                "comes back when that step ends; if its process is gone (a killed `dagster job "
                f"execute`), `{FREE_COMMAND} {slot.run_id} --dead` marks it failed and frees it")
    return " ".join([parts[0], "; ".join(parts[1:])]) + ". This step waits without polling "\
        "faster than once a second."


_original_blocked = DagsterEvent.step_concurrency_blocked


def _step_concurrency_blocked(step_context, concurrency_key: str, initial: bool = True
                              ) -> DagsterEvent:
    """Dagster's blocked event, built as Dagster builds it, with the holders named.

    ``DagsterEvent.from_step`` logs the event as it creates it, so the message is made first.
    """
    try:
        detail = holders(step_context.instance, concurrency_key, step_context.run_id)
    except Exception as err:  # the event must still be logged if the instance says no more
        detail = f"(the pool's holders could not be read: {type(err).__name__}: {err})"
    first = "blocked" if initial else "still blocked"
    return DagsterEvent.from_step(
        event_type=DagsterEventType.ENGINE_EVENT,
        step_context=step_context,
        message=f"Step {first} by limit for pool {concurrency_key}: {detail}",
        event_specific_data=EngineEventData(
            metadata={"pool": dg.MetadataValue.pool(concurrency_key)}),
    )


def _installed() -> tuple[bool, bool]:
    return (InstanceConcurrencyContext.interval_to_next_pending_claim_check
            is _interval_to_next_pending_claim_check,
            inspect.getattr_static(DagsterEvent, "step_concurrency_blocked").__func__
            is _step_concurrency_blocked)


def install() -> tuple[bool, bool]:
    """Replace the two functions if they are still Dagster's known ones; idempotent.

    Returns whether each replacement is in place (busy wait, blocked message).
    """
    busy, blocked = _installed()
    if not busy and _BUSY_WAIT_SOURCE in inspect.getsource(
            InstanceConcurrencyContext.interval_to_next_pending_claim_check):
        InstanceConcurrencyContext.interval_to_next_pending_claim_check = (  # type: ignore[method-assign]
            _interval_to_next_pending_claim_check)
    if not blocked and all(part in inspect.getsource(_original_blocked)
                           for part in _BLOCKED_SOURCE):
        DagsterEvent.step_concurrency_blocked = staticmethod(  # type: ignore[method-assign]
            _step_concurrency_blocked)
    return _installed()


def free(instance: dg.DagsterInstance, run_id: str, dead: bool = False) -> str:
    """Free every pool slot ``run_id`` holds; a run not finished only with ``dead``."""
    run = instance.get_run_by_id(run_id)
    if run is not None and not run.is_finished:
        if not dead:
            raise ValueError(
                f"run {run_id} is {run.status.value}: its slots come back when its steps end. "
                "If its process is gone (killed, machine lost), pass --dead to mark it failed "
                "and free them")
        instance.report_run_failed(run, f"marked failed by `{FREE_COMMAND} --dead`: its "
                                        "process was gone and it held pool slots")
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)
    now = instance.get_run_by_id(run_id)
    state = "no longer exists" if now is None else f"is {now.status.value}"
    return f"freed the pool slots of run {run_id}, which {state}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m resources.pool_wait",
        description="Free the pool slots (e.g. gpu) a run still holds, in $DAGSTER_HOME's "
        "instance.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("free", help="free the slots of one run")
    cmd.add_argument("run_id")
    cmd.add_argument("--dead", action="store_true",
                     help="the run says it is running but its process is gone: mark it failed")
    args = parser.parse_args(argv)
    with dg.DagsterInstance.get() as instance:
        try:
            print(free(instance, args.run_id, dead=args.dead))
        except ValueError as err:
            print(f"not freed: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
