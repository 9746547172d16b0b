"""The accelerator's residency rules, read off what a run wrote down
(saturated_dag.infra.residency).

The fast tests check the rules on hand-made logs (each breach is caught) and that the
inference resource's engine bookkeeping writes the log the rules read. The slow test reads the
``rehearsal`` profile's real run (``scripts/rehearsal_job.sh`` points
``SATURATED_DAG_REHEARSAL_OUTPUT`` at its outputs): vLLM engines for the policy and the MoE
judge, training children through Pipes, every event as it happened.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resources.inference import EngineResidency
from saturated_dag.infra.residency import (
    POLICY,
    STRONG_JUDGE,
    TEACHER,
    ResidencyLog,
    engine_spans,
    read_events,
    summary,
    violations,
)


def _event(t: float, event: str, role: str = "", pid: int = 1, step: str = "s",
           **fields: object) -> dict:
    return {"time": t, "pid": pid, "event": event, "role": role, "step": step, **fields}


GOOD = [
    _event(0, "loading", POLICY, step="pool"), _event(1, "loaded", POLICY, step="pool"),
    _event(2, "closed", POLICY, step="judge"),
    _event(3, "loading", STRONG_JUDGE, step="judge"), _event(4, "loaded", STRONG_JUDGE),
    _event(5, "closed", STRONG_JUDGE, step="entropy"),
    _event(6, "loading", POLICY, step="entropy"), _event(7, "loaded", POLICY),
    _event(8, "closed", POLICY, step="adapter"),
    _event(9, "train_start", "training", step="adapter"),
    _event(10, "child_start", "training", pid=2, step="out"),
    _event(11, "child_end", "training", pid=2, step="out"),
    _event(12, "train_end", "training", step="adapter"),
    _event(13, "loading", POLICY, step="eval"), _event(14, "loaded", POLICY),
    _event(15, "closed", POLICY, step=None),
]


def test_a_run_that_keeps_the_rules_has_no_violations() -> None:
    assert violations(GOOD) == []
    counts = summary(GOOD)
    assert counts["engine loads"] == {POLICY: 3, STRONG_JUDGE: 1}
    assert counts["most exclusive engines alive at once"] == 1
    assert counts["training children"] == 1
    assert counts["seconds loading engines"] == 4.0


def test_two_engines_at_once_is_caught_even_in_two_processes() -> None:
    events = [_event(0, "loading", POLICY), _event(1, "loading", STRONG_JUDGE, pid=7),
              _event(2, "closed", POLICY), _event(3, "closed", STRONG_JUDGE, pid=7)]
    (found,) = [v for v in violations(events) if v.startswith("two engines")]
    assert "policy" in found and "strong_judge" in found
    assert summary(events)["most exclusive engines alive at once"] == 2


def test_non_exclusive_engines_may_share() -> None:
    events = [_event(0, "loading", POLICY, exclusive=False),
              _event(1, "loading", STRONG_JUDGE, exclusive=False),
              _event(2, "closed", POLICY), _event(3, "closed", STRONG_JUDGE)]
    assert violations(events) == []


def test_an_engine_in_the_parent_while_a_child_trains_is_caught() -> None:
    events = [_event(0, "loading", POLICY, pid=1), _event(1, "train_start", "training", pid=1),
              _event(2, "train_end", "training", pid=1), _event(3, "closed", POLICY, pid=1)]
    assert any("while s trained" in v for v in violations(events))
    # the same engine in another process (the child itself) is not the parent's
    other = [dict(e, pid=5) if e["event"] in ("loading", "closed") else e for e in events]
    assert not any("trained" in v for v in violations(other))


def test_an_unclosed_engine_counts_to_the_end() -> None:
    events = [_event(0, "loading", STRONG_JUDGE), _event(5, "loading", POLICY, pid=3)]
    found = violations(events)
    assert any(v.startswith("two engines") for v in found)
    assert any("strong judge" in v and "still alive" in v for v in found)
    assert engine_spans(events)[0].end is None


def test_the_log_appends_lines_another_process_can_read(tmp_path: Path) -> None:
    log = ResidencyLog(tmp_path / "residency" / "run.jsonl")
    log.record("loading", POLICY, "pool", exclusive=True, model="m")
    log.record("closed", POLICY, "pool")
    events = read_events(log.path)  # type: ignore[arg-type]
    assert [e["event"] for e in events] == ["loading", "closed"]
    assert events[0]["pid"] == os.getpid() and events[0]["model"] == "m"
    ResidencyLog(None).record("loading", POLICY)  # records nothing, raises nothing
    blocked = tmp_path / "file"
    blocked.write_text("")
    ResidencyLog(blocked / "run.jsonl").record("loading", POLICY)  # unwritable: a warning
    (tmp_path / "bad.jsonl").write_text('{"time": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        read_events(tmp_path / "bad.jsonl")


class _Engine:
    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self.closed = name, closed

    def close(self) -> None:
        self.closed.append(self.name)


def test_engine_residency_writes_what_the_rules_read(tmp_path: Path) -> None:
    """Policy, then judge, teacher and policy again: each exclusive load closes the last."""
    log = ResidencyLog(tmp_path / "r.jsonl")
    engines, closed = EngineResidency(log), []
    for role in (POLICY, STRONG_JUDGE, TEACHER, POLICY):
        engines.get(role, role, True, lambda r=role: _Engine(r, closed), model=role)
        assert engines.roles() == [role]
    engines.release()
    assert closed == [POLICY, STRONG_JUDGE, TEACHER, POLICY]
    events = read_events(log.path)  # type: ignore[arg-type]
    assert violations(events) == []
    assert [e["event"] for e in events][:3] == ["loading", "loaded", "closed"]
    assert summary(events)["engine loads"] == {POLICY: 2, STRONG_JUDGE: 1, TEACHER: 1}


def test_a_failed_load_is_closed_in_the_log(tmp_path: Path) -> None:
    log = ResidencyLog(tmp_path / "r.jsonl")

    def boom() -> _Engine:
        raise RuntimeError("no memory")

    with pytest.raises(RuntimeError):
        EngineResidency(log).get(POLICY, "k", True, boom)
    spans = engine_spans(read_events(log.path))  # type: ignore[arg-type]
    assert len(spans) == 1 and spans[0].end is not None


REHEARSAL = os.environ.get("SATURATED_DAG_REHEARSAL_OUTPUT")
RUNS = int(os.environ.get("SATURATED_DAG_REHEARSAL_RUNS", "2"))  # one per job the script ran


@pytest.mark.slow
@pytest.mark.skipif(not REHEARSAL, reason="reads the rehearsal's outputs: run "
                    "scripts/rehearsal_job.sh (sets SATURATED_DAG_REHEARSAL_OUTPUT)")
def test_the_rehearsal_kept_the_residency_rules() -> None:
    """Every run of a rehearsal (each part of a paper job: jobs/staged.py): at most one
    engine alive at a time, none in the parent while an adapter trains, the strong judge's
    engine gone before the policy's returns; and the logs saw what they should (both engines
    and the entropy route's transformers copy, in the parts that run the stages before the
    adapters; training children that are other processes, in every part)."""
    logs = sorted(Path(REHEARSAL, "residency").glob("*.jsonl"))  # type: ignore[arg-type]
    assert len(logs) == RUNS, logs  # one per run
    roles: set[str] = set()
    for path in logs:
        events = read_events(path)
        assert violations(events) == [], path
        counts = summary(events)
        print(path.name, counts)
        roles |= set(counts["engine loads"])
        # the run's order (assets/_priority.py): the policy for its first stages, then once
        # more for every adapter's check and eval report (without it: a load per few adapters)
        assert counts["engine loads"].get(POLICY, 0) <= 2, counts
        assert counts["most exclusive engines alive at once"] == 1
        children = [e for e in events if e["event"] == "child_start"]
        parents = {e["pid"] for e in events if e["event"] == "train_start"}
        assert children and len(children) == sum(e["event"] == "child_end" for e in events)
        assert not {e["pid"] for e in children} & parents  # trained in other processes
        assert all(not e["engines_held"] for e in events if e["event"] == "train_start")
        judge = [s for s in engine_spans(events) if s.role == STRONG_JUDGE]
        assert all(s.end is not None for s in judge)
    assert {POLICY, STRONG_JUDGE, TEACHER} <= roles, roles
