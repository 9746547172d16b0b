"""Wall time of a finished Dagster run, broken down by asset kind, from its step events.

Why from the run's own events: the numbers then describe the run that produced the results
(the same run id the UI shows), not a separate timing run. Each step's duration is its
STEP_SUCCESS (or STEP_FAILURE) time minus its STEP_START time; the assets a step materialized
name its kind (the key without task and split: ``adapter``, ``eval``, ``generation_pool`` ...).

    DAGSTER_HOME=$PWD/.dagster_home .venv/bin/python -m benchmarks.demo_breakdown
    .venv/bin/python -m benchmarks.demo_breakdown --run-id RUN_ID --out outputs/demo.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
from dagster import DagsterEventType

SPLITS = ("saturated", "strict_saturated", "hard")
TASKS = ("chain_sum", "gsm8k")


def asset_kind(path: list[str]) -> str:
    """``[prefix?, task, split?, kind, name?]`` -> kind (a profile's ``key_prefix``, the
    study's ``study/``, is dropped); a single-part key is its own kind."""
    if len(path) > 2 and path[0] not in TASKS and path[1] in TASKS:
        path = path[1:]
    parts = list(path) if len(path) == 1 else list(path[1:])
    if len(parts) > 1 and parts[0] in SPLITS:
        parts = parts[1:]
    return parts[0]


@dataclass
class StepTiming:
    step_key: str
    start: float | None = None
    end: float | None = None
    status: str = "started"
    assets: list[list[str]] = field(default_factory=list)
    checks: int = 0

    @property
    def seconds(self) -> float:
        return (self.end - self.start) if self.start is not None and self.end is not None else 0.0

    @property
    def kind(self) -> str:
        if self.assets:
            return asset_kind(self.assets[0])
        return "asset checks" if self.checks else self.step_key


def find_run(instance: dg.DagsterInstance, run_id: str | None, job: str) -> Any:
    """The given run, or the latest run of ``job``."""
    if run_id:
        run = instance.get_run_by_id(run_id)
        if run is None:
            raise LookupError(f"no run {run_id} in this instance")
        return run
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=1)
    if not runs:
        raise LookupError(f"no run of job {job!r} in this instance (is DAGSTER_HOME set?)")
    return runs[0]


def step_timings(instance: dg.DagsterInstance, run_id: str) -> tuple[list[StepTiming],
                                                                    dict[str, float]]:
    """Per step: start, end, status and materialized assets; and the run's own start/end."""
    kinds = {DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS,
             DagsterEventType.STEP_FAILURE, DagsterEventType.ASSET_MATERIALIZATION,
             DagsterEventType.RUN_START, DagsterEventType.RUN_SUCCESS,
             DagsterEventType.RUN_FAILURE, DagsterEventType.ASSET_CHECK_EVALUATION}
    steps: dict[str, StepTiming] = {}
    run: dict[str, float] = {}
    for entry in instance.all_logs(run_id, of_type=kinds):
        event = entry.dagster_event
        if event is None:
            continue
        kind = event.event_type
        if kind == DagsterEventType.RUN_START:
            run["start"] = entry.timestamp
        elif kind in (DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE):
            run["end"] = entry.timestamp
        if entry.step_key is None:
            continue
        step = steps.setdefault(entry.step_key, StepTiming(entry.step_key))
        if kind == DagsterEventType.STEP_START:
            step.start = entry.timestamp
        elif kind == DagsterEventType.STEP_SUCCESS:
            step.end, step.status = entry.timestamp, "success"
        elif kind == DagsterEventType.STEP_FAILURE:
            step.end, step.status = entry.timestamp, "failure"
        elif kind == DagsterEventType.ASSET_MATERIALIZATION:
            step.assets.append(list(event.asset_key.path))
        elif kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            step.checks += 1
    return list(steps.values()), run


def breakdown(instance: dg.DagsterInstance, run_id: str | None = None,
              job: str = "demo") -> dict[str, Any]:
    """Wall time and seconds per asset kind (sum of step durations) of one run."""
    run = find_run(instance, run_id, job)
    steps, bounds = step_timings(instance, run.run_id)
    timed = [s for s in steps if s.start is not None and s.end is not None]
    per_kind: dict[str, dict[str, float]] = defaultdict(lambda: {"steps": 0, "seconds": 0.0})
    for step in timed:
        per_kind[step.kind]["steps"] += 1
        per_kind[step.kind]["seconds"] += step.seconds
    first = min((s.start for s in timed), default=None)
    last = max((s.end for s in timed), default=None)
    return {
        "run_id": run.run_id, "job": run.job_name, "status": str(run.status.value),
        "run_start_utc": (datetime.fromtimestamp(bounds["start"], UTC).strftime("%Y-%m-%d %H:%M")
                          if "start" in bounds else None),
        "run_wall_s": (bounds["end"] - bounds["start"]) if {"start", "end"} <= set(bounds)
        else None,
        "steps_wall_s": (last - first) if first is not None and last is not None else None,
        "steps": len(timed),
        "sum_of_steps_s": sum(s.seconds for s in timed),
        "per_kind": dict(sorted(per_kind.items(), key=lambda kv: -kv[1]["seconds"])),
    }


def adapter_phases(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Seconds of every adapter step split at its log lines, summed over the run's adapters:
    ``startup`` (step start to the trainer's first line, ``training <method> on ...``: the
    child process, its imports, the model and the data), ``training`` (to the last ``epoch
    N:`` line: optimizer steps and each epoch's validation pass@1), ``finish`` (to step end:
    saving the adapter and reporting it)."""
    marks: dict[str, dict[str, float]] = defaultdict(dict)
    for entry in instance.all_logs(run_id):
        key = entry.step_key
        if key is None or "__adapter__" not in key:
            continue
        event = entry.dagster_event
        if event is not None and event.event_type == DagsterEventType.STEP_START:
            marks[key]["start"] = entry.timestamp
        elif event is not None and event.event_type == DagsterEventType.STEP_SUCCESS:
            marks[key]["end"] = entry.timestamp
        elif event is None and entry.user_message.startswith("training "):
            marks[key].setdefault("training", entry.timestamp)
        elif event is None and entry.user_message.startswith("epoch "):
            marks[key]["epochs"] = entry.timestamp
    totals = {"adapters": 0.0, "startup": 0.0, "training": 0.0, "finish": 0.0}
    for m in marks.values():
        if {"start", "training", "epochs", "end"} <= set(m):  # trained, not a cache hit
            totals["adapters"] += 1
            totals["startup"] += m["training"] - m["start"]
            totals["training"] += m["epochs"] - m["training"]
            totals["finish"] += m["end"] - m["epochs"]
    return totals


def markdown(result: dict[str, Any]) -> str:
    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"

    lines = [f"run `{result['run_id']}` of job `{result['job']}` ({result['status']}, started "
             f"{result['run_start_utc']} UTC): "
             f"run wall {fmt(result['run_wall_s'])} s, first step start to last step end "
             f"{fmt(result['steps_wall_s'])} s, {result['steps']} steps", "",
             "| asset kind | steps | seconds | share |", "|---|---|---|---|"]
    total = result["sum_of_steps_s"] or 1.0
    for kind, row in result["per_kind"].items():
        lines.append(f"| {kind} | {int(row['steps'])} | {row['seconds']:.1f} | "
                     f"{row['seconds'] / total:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", default=None, help="default: the latest run of --job")
    parser.add_argument("--job", default="demo")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--adapter-phases", action="store_true",
                        help="also split the adapter steps into startup, training and finish")
    args = parser.parse_args(argv)
    instance = dg.DagsterInstance.get()
    result = breakdown(instance, args.run_id, args.job)
    print(markdown(result))
    if args.adapter_phases:
        result["adapter_phases_s"] = adapter_phases(instance, result["run_id"])
        phases = result["adapter_phases_s"]
        print(f"\nadapter steps, {int(phases['adapters'])} trained: startup "
              f"{phases['startup']:.1f} s, training {phases['training']:.1f} s, "
              f"finish {phases['finish']:.1f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
