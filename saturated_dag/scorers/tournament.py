"""Round-robin judge tournaments (Sec. 3.2): win rate r = wins / (n - 1) per completion.

Every unordered pair of a question's n candidates is judged exactly once (solution 0 = the
lower sample index), or, with ``both_orders``, once in each order and averaged, which cancels
a judge's position bias. A comparison without a verdict (a parse failure) awards no win but
still counts in the denominator, so failures lower scores visibly and are reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from math import comb

import numpy as np
import pandas as pd

from saturated_dag.scorers.judges import Judge, JudgeRequest, LogFn, Verdict
from saturated_dag.scorers.selection import Selection, score_frame


def schedule_pairs(k: int, both_orders: bool = False) -> list[tuple[int, int]]:
    """Ordered (first, second) positions of every comparison among ``k`` candidates."""
    pairs = list(combinations(range(k), 2))
    return pairs + [(j, i) for i, j in pairs] if both_orders else pairs


def expected_calls(sizes: Sequence[int], both_orders: bool = False) -> int:
    """sum over questions of C(k, 2), doubled with both orders."""
    return sum(comb(k, 2) for k in sizes) * (2 if both_orders else 1)


@dataclass
class TournamentResult:
    scores: pd.DataFrame
    comparisons: pd.DataFrame
    summary: dict[str, object] = field(default_factory=dict)


def win_rates(k: int, pairs: Sequence[tuple[int, int]], verdicts: Sequence[Verdict]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate: wins, comparisons, parse failures and forced verdicts it took part in."""
    wins, seen = np.zeros(k), np.zeros(k, dtype=int)
    failures, forced = np.zeros(k, dtype=int), np.zeros(k, dtype=int)
    for (a, b), verdict in zip(pairs, verdicts, strict=True):
        seen[[a, b]] += 1
        if verdict.choice is None:
            failures[[a, b]] += 1
        elif verdict.tie:
            wins[[a, b]] += 0.5
        else:
            wins[(a, b)[verdict.choice]] += 1
        if verdict.forced:
            forced[[a, b]] += 1
    return wins, seen, failures, forced


def run_tournament(
    selection: Selection,
    judge: Judge,
    scorer: str,
    both_orders: bool = False,
    log: LogFn | None = None,
) -> TournamentResult:
    """Judge every scheduled pair of every selected question; scores are win rates."""
    say = log or (lambda _m: None)
    groups = selection.groups()
    requests: list[JudgeRequest] = []
    plan: list[tuple[int, list[tuple[int, int]]]] = []  # (first request, pairs) per question
    for _qid, _split, rows in groups:
        texts = rows["completion"].tolist()
        task, problem = str(rows["task"].iloc[0]), str(rows["problem"].iloc[0])
        pairs = schedule_pairs(len(texts), both_orders)
        plan.append((len(requests), pairs))
        requests += [JudgeRequest(task, problem, (texts[a], texts[b])) for a, b in pairs]
    expected = expected_calls([len(rows) for _, _, rows in groups], both_orders)
    say(f"{scorer}: {len(groups)} questions, {len(requests)} judge calls "
        f"(expected sum C(k,2){' x 2' if both_orders else ''} = {expected})")
    verdicts = judge.judge(requests, log=say) if requests else []
    if len(verdicts) != len(requests):
        raise RuntimeError(f"judge returned {len(verdicts)} verdicts for {len(requests)} calls")
    frames, comparison_rows = [], []
    for (qid, split, rows), (first, pairs) in zip(groups, plan, strict=True):
        got = verdicts[first : first + len(pairs)]
        wins, seen, failures, forced = win_rates(len(rows), pairs, got)
        frames.append(score_frame(rows, scorer, wins / seen, {
            "wins": wins, "comparisons": seen, "parse_failures": failures,
            "forced_judgments": forced}))
        samples = rows["sample_index"].astype(int).tolist()
        for (a, b), verdict in zip(pairs, got, strict=True):
            comparison_rows.append({
                "question_id": qid, "split": split, "first": samples[a], "second": samples[b],
                "choice": verdict.choice, "forced": verdict.forced, "tie": verdict.tie,
                "judge_output": verdict.text})
    scores = (pd.concat(frames, ignore_index=True) if frames
              else score_frame(selection.rows, scorer, []))
    summary: dict[str, object] = {
        "questions": len(groups),
        "completions": len(scores),
        "judge_calls": len(requests),
        "expected_judge_calls": expected,
        "both_orders": both_orders,
        "parse_failures": sum(v.choice is None for v in verdicts),
        "forced_judgments": sum(v.forced for v in verdicts),
        "ties": sum(v.tie for v in verdicts),
        "first_position_win_rate": (
            float(np.mean([v.choice == 0 for v in verdicts if v.choice is not None and not v.tie]))
            if any(v.choice is not None and not v.tie for v in verdicts) else None),
    }
    return TournamentResult(scores, pd.DataFrame(comparison_rows), summary)
