"""Which process holds which engine, and when: a JSON-lines log and the rules it must keep.

The accelerator has one owner at a time (``resources/inference.py``): at most one exclusive
engine (a vLLM engine, or a model on CUDA) alive at once, none in the orchestrating process
while an adapter trains in its child, and the strong judge's engine closed before the policy's
comes back. Those rules live in code paths far apart (the inference resource, the training
client, the child), so the pipeline writes down what actually happened, one line per event,
and ``violations`` reads the rules off the record. The ``rehearsal`` profile's CI run checks
it (``tests/infra/test_residency.py``); any run leaves one (``<output_dir>/residency/<run>.jsonl``).

Events (``event`` field): ``loading`` (an engine's load starts; from then on it counts as on
the device), ``loaded``, ``closed`` (its memory freed), ``train_start``/``train_end`` (the
parent around a training child), ``child_start``/``child_end`` (the child itself). Each line
carries ``time`` (seconds since the epoch), ``pid``, ``role`` and ``step`` (the Dagster step
that caused it, when known).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLICY, STRONG_JUDGE, TEACHER = "policy", "strong_judge", "policy_teacher"
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResidencyLog:
    """Appends events to ``path`` (one JSON object a line; ``None``: records nothing).

    Lines are short and written with one ``write`` on a file opened for appending, so the
    parent and its children may share the file. A log that cannot be written (a read-only
    output folder) is a warning, not a failed run: it observes the run, it is not its output."""

    path: Path | None

    def record(self, event: str, role: str = "", step: str | None = None,
               **fields: Any) -> None:
        if self.path is None:
            return
        line = {"time": time.time(), "pid": os.getpid(), "event": event, "role": role,
                "step": step, **fields}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line, sort_keys=True) + "\n")
        except OSError as err:
            _LOG.warning("residency log %s not written (%s): %s", self.path, event, err)


def read_events(path: Path) -> list[dict[str, Any]]:
    """A log's events in time order; a malformed line is an error naming it."""
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not a JSON event ({err})") from None
    return sorted(events, key=lambda e: e["time"])


@dataclass
class EngineSpan:
    """One engine's time on the device: from ``loading`` to ``closed`` (None: never closed)."""

    pid: int
    role: str
    exclusive: bool
    start: float
    end: float | None
    step: str | None


def engine_spans(events: Iterable[dict[str, Any]]) -> list[EngineSpan]:
    """Pair each ``loading`` with the next ``closed`` of the same process and role."""
    open_spans: dict[tuple[int, str], EngineSpan] = {}
    spans: list[EngineSpan] = []
    for e in events:
        key = (e["pid"], e["role"])
        if e["event"] == "loading":
            span = EngineSpan(e["pid"], e["role"], bool(e.get("exclusive", True)), e["time"],
                              None, e.get("step"))
            open_spans[key] = span
            spans.append(span)
        elif e["event"] == "closed" and key in open_spans:
            open_spans.pop(key).end = e["time"]
    return spans


def _overlap(a0: float, a1: float | None, b0: float, b1: float | None) -> bool:
    inf = float("inf")
    return a0 < (b1 if b1 is not None else inf) and b0 < (a1 if a1 is not None else inf)


def violations(events: list[dict[str, Any]]) -> list[str]:
    """Every breach of the residency rules in a log (empty: the run kept them).

    1. At most one exclusive engine alive at a time, across every process.
    2. No engine of the training's parent alive while a training child runs
       (``train_start`` to ``train_end`` of that parent).
    3. When the policy's engine loads after the strong judge's, the judge's is closed first.
    """
    spans = engine_spans(events)
    found: list[str] = []
    exclusive = [s for s in spans if s.exclusive]
    for i, a in enumerate(exclusive):
        for b in exclusive[i + 1:]:
            if _overlap(a.start, a.end, b.start, b.end):
                found.append(f"two engines at once: {a.role} (pid {a.pid}, step {a.step}) and "
                             f"{b.role} (pid {b.pid}, step {b.step}) at {b.start:.3f}")
    starts = [e for e in events if e["event"] == "train_start"]
    ends = [e for e in events if e["event"] == "train_end"]
    for start in starts:
        end = next((e for e in ends if e["pid"] == start["pid"] and e["time"] >= start["time"]
                    and e.get("step") == start.get("step")), None)
        stop = end["time"] if end is not None else None
        for s in spans:
            if s.pid == start["pid"] and _overlap(s.start, s.end, start["time"], stop):
                found.append(f"{s.role} engine alive in the parent (pid {s.pid}) while "
                             f"{start.get('step')} trained")
    for policy in (s for s in spans if s.role == POLICY):
        for judge in (s for s in spans if s.role == STRONG_JUDGE and s.start < policy.start):
            if judge.end is None or judge.end > policy.start:
                found.append(f"strong judge (pid {judge.pid}, step {judge.step}) still alive "
                             f"when the policy loaded for {policy.step}")
    return found


def summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts for a run's metadata and note: engine loads per role, training children, the
    most engines alive at once, and the seconds spent loading engines."""
    spans = engine_spans(events)
    loads: dict[str, int] = {}
    for s in spans:
        loads[s.role] = loads.get(s.role, 0) + 1
    points = sorted([(s.start, 1) for s in spans if s.exclusive]
                    + [(s.end, -1) for s in spans if s.exclusive and s.end is not None])
    alive = most = 0
    for _, delta in points:
        alive += delta
        most = max(most, alive)
    loading: dict[tuple[int, str], float] = {}
    load_seconds = 0.0
    for e in events:
        if e["event"] == "loading":
            loading[(e["pid"], e["role"])] = e["time"]
        elif e["event"] == "loaded" and (e["pid"], e["role"]) in loading:
            load_seconds += e["time"] - loading.pop((e["pid"], e["role"]))
    return {"engine loads": loads,
            "training children": sum(e["event"] == "child_start" for e in events),
            "most exclusive engines alive at once": most,
            "seconds loading engines": round(load_seconds, 1),
            "processes": len({e["pid"] for e in events})}
