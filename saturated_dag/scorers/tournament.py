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
import polars as pl

from saturated_dag.infra.log import LogFn
from saturated_dag.infra.shards import ShardStore, run_shards
from saturated_dag.scorers.judges import Judge, JudgeRequest, Verdict
from saturated_dag.scorers.scored_completions import ScoredCompletions, score_frame


def schedule_pairs(k: int, both_orders: bool = False) -> list[tuple[int, int]]:
    """Ordered (first, second) positions of every comparison among ``k`` candidates."""
    pairs = list(combinations(range(k), 2))
    return pairs + [(j, i) for i, j in pairs] if both_orders else pairs


def expected_calls(sizes: Sequence[int], both_orders: bool = False) -> int:
    """sum over questions of C(k, 2), doubled with both orders."""
    return sum(comb(k, 2) for k in sizes) * (2 if both_orders else 1)


@dataclass
class TournamentResult:
    """Win rates per completion (``score_frame`` layout plus counts), one row per judged
    comparison (``COMPARISON_SCHEMA``) and the tournament's counts."""

    scores: pl.DataFrame
    comparisons: pl.DataFrame
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


COMPARISON_SCHEMA = {"question_id": pl.String, "split": pl.String, "first": pl.Int64,
                     "second": pl.Int64, "choice": pl.Int64, "forced": pl.Boolean,
                     "tie": pl.Boolean, "judge_output": pl.String}
"""``choice`` is null for a comparison without a verdict (a parse failure)."""
COMPARISON_COLUMNS = list(COMPARISON_SCHEMA)
Group = tuple[str, str, pl.DataFrame]


def _comparison_frame(rows: list[dict]) -> pl.DataFrame:
    """Comparisons with fixed dtypes (``choice`` nullable), so shards concatenate exactly."""
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA)


def judge_groups(groups: Sequence[Group], judge: Judge, both_orders: bool = False,
                 log: LogFn | None = None) -> pl.DataFrame:
    """Every scheduled comparison of these questions, one row each (the expensive part)."""
    requests: list[JudgeRequest] = []
    plan: list[list[tuple[int, int]]] = []
    for _qid, _split, rows in groups:
        texts = rows["completion"].to_list()
        task, problem = str(rows["task"][0]), str(rows["problem"][0])
        pairs = schedule_pairs(len(texts), both_orders)
        plan.append(pairs)
        requests += [JudgeRequest(task, problem, (texts[a], texts[b])) for a, b in pairs]
    verdicts = judge.judge(requests, log=log) if requests else []
    if len(verdicts) != len(requests):
        raise RuntimeError(f"judge returned {len(verdicts)} verdicts for {len(requests)} calls")
    out, cursor = [], 0
    for (qid, split, rows), pairs in zip(groups, plan, strict=True):
        samples = rows["sample_index"].cast(pl.Int64).to_list()
        for (a, b), verdict in zip(pairs, verdicts[cursor : cursor + len(pairs)], strict=True):
            out.append({"question_id": qid, "split": split, "first": samples[a],
                        "second": samples[b], "choice": verdict.choice, "forced": verdict.forced,
                        "tie": verdict.tie, "judge_output": verdict.text})
        cursor += len(pairs)
    return _comparison_frame(out)


def _verdicts(comparisons: pl.DataFrame) -> list[Verdict]:
    columns = [comparisons[c].to_list() for c in ("choice", "forced", "tie", "judge_output")]
    return [Verdict(None if c is None else int(c), bool(f), bool(t), str(x))
            for c, f, t, x in zip(*columns, strict=True)]


def tally(groups: Sequence[Group], comparisons: pl.DataFrame, scorer: str,
          completion_rows: pl.DataFrame) -> pl.DataFrame:
    """Win rates per completion from stored comparisons (cheap: no judge involved)."""
    by_question = {key[0]: part for key, part in comparisons.partition_by(
        "question_id", maintain_order=True, as_dict=True).items()}
    frames = []
    for qid, _split, rows in groups:
        part = by_question.get(qid, comparisons.head(0))
        position = {s: i for i, s in enumerate(rows["sample_index"].cast(pl.Int64).to_list())}
        pairs = [(position[int(a)], position[int(b)])
                 for a, b in zip(part["first"].to_list(), part["second"].to_list(), strict=True)]
        wins, seen, failures, forced = win_rates(rows.height, pairs, _verdicts(part))
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = wins / seen
        frames.append(score_frame(rows, scorer, rate, {
            "wins": wins, "comparisons": seen, "parse_failures": failures,
            "forced_judgments": forced}))
    if frames:
        return pl.concat(frames, how="vertical")
    # nothing to judge: the same columns, empty (the stored schema does not depend on the data)
    return score_frame(completion_rows.head(0), scorer, [], {
        "wins": pl.Series([], dtype=pl.Float64), "comparisons": pl.Series([], dtype=pl.Int64),
        "parse_failures": pl.Series([], dtype=pl.Int64),
        "forced_judgments": pl.Series([], dtype=pl.Int64)})


def summarise_comparisons(comparisons: pl.DataFrame, groups: Sequence[Group],
                          both_orders: bool, completions: int) -> dict[str, object]:
    """The tournament's counts, from the comparisons table (fresh or reused)."""
    decided = comparisons.filter(pl.col("choice").is_not_null() & ~pl.col("tie"))
    first_wins = int((decided["choice"] == 0).sum())
    return {
        "questions": len(groups),
        "completions": completions,
        "judge_calls": comparisons.height,
        "expected_judge_calls": expected_calls([rows.height for _, _, rows in groups],
                                               both_orders),
        "both_orders": both_orders,
        "parse_failures": int(comparisons["choice"].null_count()),
        "forced_judgments": int(comparisons["forced"].sum()),
        "ties": int(comparisons["tie"].sum()),
        "first_position_win_rate": (first_wins / decided.height if decided.height else None),
    }


def run_tournament(
    completions: ScoredCompletions,
    judge: Judge,
    scorer: str,
    both_orders: bool = False,
    log: LogFn | None = None,
    store: ShardStore | None = None,
    shard_size: int | None = None,
) -> TournamentResult:
    """Judge every scheduled pair of every selected question; scores are win rates.

    ``shard_size`` questions per shard; with a ``store`` each shard's comparisons are kept as
    soon as judged and reused on a re-run (``store.last_stats``), so a crash costs at most one
    shard. Scores and counts are always recomputed from the comparisons table.
    """
    say = log or (lambda _m: None)
    groups = completions.groups()
    expected = expected_calls([rows.height for _, _, rows in groups], both_orders)
    say(f"{scorer}: {len(groups)} questions, {expected} judge calls "
        f"(expected sum C(k,2){' x 2' if both_orders else ''} = {expected})")
    if store is not None and shard_size is None:
        raise ValueError("a shard store needs a shard_size")

    def compute(_index: int, part: Sequence[Group]) -> pl.DataFrame:
        return judge_groups(part, judge, both_orders, say)

    if shard_size is None:
        comparisons = judge_groups(groups, judge, both_orders, say)
    else:
        comparisons, _stats = run_shards(store, groups, shard_size, compute, say)
    scores = tally(groups, comparisons, scorer, completions.rows)
    summary = summarise_comparisons(comparisons, groups, both_orders, len(scores))
    if summary["judge_calls"] != expected:
        raise RuntimeError(f"{summary['judge_calls']} comparisons stored for {expected} "
                           "scheduled judge calls")
    return TournamentResult(scores, comparisons, summary)
