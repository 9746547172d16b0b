"""Training sets built from scores (Sec. 3.3-3.4, App. C.1): DPO pairs, σ-RRHF groups, SFT.

Inputs are polars frames: a generation pool (one row per completion) and a scores table
(question_id, sample_index, score). Every rule that drops a question is counted in the
returned stats, and random choices (ties at the top or bottom) draw from a recorded seed.

Why the draws are done over Python rows: the seeded ``random.Random`` must see the candidates
in one fixed order (questions by id, completions by sample index), the order the pandas
version saw, so the same seed gives the same pairs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from saturated_dag.schemas import schema

KEY = ["question_id", "sample_index"]


@dataclass
class BuildStats:
    """What a builder kept and skipped, for asset metadata."""

    questions_in: int = 0
    rows_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    adjusted: dict[str, int] = field(default_factory=dict)
    seed: int | None = None

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def adjust(self, reason: str) -> None:
        """A row kept, but built differently from the plain rule (counted, never hidden)."""
        self.adjusted[reason] = self.adjusted.get(reason, 0) + 1

    def as_metadata(self) -> dict[str, object]:
        out: dict[str, object] = {"questions_in": self.questions_in, "rows_out": self.rows_out}
        out.update({f"skipped_{k}": v for k, v in sorted(self.skipped.items())})
        out.update({f"adjusted_{k}": v for k, v in sorted(self.adjusted.items())})
        if self.seed is not None:
            out["tie_break_seed"] = self.seed
        return out


Built = tuple[pl.DataFrame, BuildStats]
Row = dict[str, Any]
"""One completion as a plain dict (a row of the merged pool and scores)."""

# the asset frames' columns, declared once in saturated_dag/schemas.py
PAIR_SCHEMA = schema("dpo_pairs")
"""Columns of DPO and correctness pairs (scores are null when the pairs were not scored)."""
RRHF_SCHEMA = schema("rrhf_groups")
SFT_SCHEMA = schema("sft_set")


def _require_unique_keys(frame: pl.DataFrame, name: str) -> None:
    dup = frame.select(KEY).filter(pl.struct(KEY).is_duplicated())
    if dup.height:
        qid, index = dup.row(0)
        raise ValueError(f"{name} has more than one row for question {qid}, sample {index}")


def _scored(pool: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """Scores joined to their completions, in the scores table's row order."""
    missing = {"question_id", "sample_index", "score"} - set(scores.columns)
    if missing:
        raise ValueError(f"scores table lacks columns {sorted(missing)}")
    if scores["question_id"].null_count():
        raise ValueError("scores table has rows without a question_id")
    _require_unique_keys(scores, "scores table")
    _require_unique_keys(pool, "generation pool")
    merged = scores.select(*KEY, "score").join(pool, on=KEY, how="left", maintain_order="left")
    if merged["completion"].null_count():
        raise ValueError("scores refer to completions that are not in the generation pool")
    score = pl.col("score").cast(pl.Float64)
    bad = merged.filter(score.is_null() | ~score.is_finite())
    if bad.height:
        raise ValueError(f"non-finite score for question {bad['question_id'][0]}")
    return merged


def _question_groups(frame: pl.DataFrame) -> Iterator[list[Row]]:
    """Each question's rows, questions in id order, rows in frame order within a question
    (pandas' ``groupby(sort=True)``, which skips rows without a question id)."""
    rows = frame.filter(pl.col("question_id").is_not_null())
    ordered = rows.sort("question_id", maintain_order=True)  # stable: keeps row order
    for group in ordered.partition_by("question_id", maintain_order=True):
        yield group.to_dicts()


def _by_sample(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: r["sample_index"])


def _record(prompt: str, chosen: Row, rejected: Row | None = None) -> Row:
    row = {"question_id": chosen["question_id"], "prompt": prompt,
           "chosen": chosen["completion"], "chosen_sample": int(chosen["sample_index"]),
           "chosen_score": float(chosen["score"]) if "score" in chosen else None}
    if rejected is not None:
        row.update({"rejected": rejected["completion"],
                    "rejected_sample": int(rejected["sample_index"]),
                    "rejected_score": float(rejected["score"]) if "score" in rejected else None})
    return row


def dpo_pairs(
    pool: pl.DataFrame, scores: pl.DataFrame, seed: int = 0, distinct_texts: bool = False
) -> Built:
    """y_w = argmax, y_l = argmin of the scores, ties broken at random (Sec. 3.3).

    The paper's rule (the default): a question is skipped only when it has fewer than two
    completions or all its scores are equal. Two samples can have the same text (a small
    model's bare-answer style); such a pair is kept, it carries zero DPO gradient.

    ``distinct_texts`` (not in the paper; ``training.dpo_distinct_texts``): a pair never puts
    the same text on both sides. y_w is still a top-scored completion, drawn among those with
    a different text scored below the top, preferring those whose lowest different text is
    scored lowest (counted as ``adjusted_chosen_tie_restricted_to_distinct_text`` when that
    narrows the ties); y_l is the lowest-scored completion whose text differs from y_w's
    (counted as ``adjusted_rejected_text_equal_to_chosen`` when it is not an argmin). A pair
    with different texts is found whenever one exists with y_w at the top score; otherwise
    every completion has the same text and the question is skipped
    (``skipped_all_completions_same_text``).
    """
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    rows = []
    for group in _question_groups(_scored(pool, scores)):
        stats.questions_in += 1
        if len(group) < 2:
            stats.skip("fewer_than_two_completions")
            continue
        group = _by_sample(group)
        values = [r["score"] for r in group]
        if max(values) == min(values):
            stats.skip("all_scores_equal")
            continue
        pair = (_distinct_text_pair(group, rng, stats) if distinct_texts
                else _argmax_argmin_pair(group, rng))
        if pair is None:
            stats.skip("all_completions_same_text")
            continue
        chosen, rejected = pair
        rows.append(_record(chosen["prompt"], chosen, rejected))
    stats.rows_out = len(rows)
    return pl.DataFrame(rows, schema=PAIR_SCHEMA), stats


Pair = tuple[Row, Row]


def _pick(rows: list[Row], rng: random.Random) -> Row:
    """One row uniformly at random (rows in sample order, so the draw is reproducible)."""
    return rows[rng.randrange(len(rows))]


def _argmax_argmin_pair(group: list[Row], rng: random.Random) -> Pair:
    """The paper's pair: a random argmax against a random argmin."""
    top = max(r["score"] for r in group)
    low = min(r["score"] for r in group)
    chosen = _pick([r for r in group if r["score"] == top], rng)
    return chosen, _pick([r for r in group if r["score"] == low], rng)


def _distinct_text_pair(group: list[Row], rng: random.Random,
                        stats: BuildStats) -> Pair | None:
    """A top-scored y_w and the lowest-scored y_l with a different text (None: no such pair)."""
    top = max(r["score"] for r in group)
    below = [r for r in group if r["score"] < top]
    best = [r for r in group if r["score"] == top]
    # for each top-scored candidate, the lowest score among lower-scored different texts
    lowest: list[tuple[Row, float]] = []
    for candidate in best:
        reach = [r["score"] for r in below if r["completion"] != candidate["completion"]]
        if reach:
            lowest.append((candidate, min(reach)))
    if not lowest:
        return None
    floor = min(value for _, value in lowest)
    candidates = [row for row, value in lowest if value == floor]
    if len(candidates) < len(best):
        stats.adjust("chosen_tie_restricted_to_distinct_text")
    chosen = _pick(candidates, rng)
    if floor != min(r["score"] for r in group):
        stats.adjust("rejected_text_equal_to_chosen")
    worst = [r for r in below
             if r["completion"] != chosen["completion"] and r["score"] == floor]
    return chosen, _pick(worst, rng)


def rrhf_groups(pool: pl.DataFrame, scores: pl.DataFrame) -> Built:
    """All scored completions of a question with their scores (one row per completion)."""
    stats = BuildStats()
    merged = _scored(pool, scores)
    sizes = merged.group_by("question_id").len().sort("question_id")
    for size in sizes["len"]:
        stats.questions_in += 1
        if size < 2:
            stats.skip("fewer_than_two_completions")
    kept = sizes.filter(pl.col("len") >= 2)["question_id"]
    table = (merged.filter(pl.col("question_id").is_in(kept.implode()))
             .select(pl.col(name).cast(dtype) for name, dtype in RRHF_SCHEMA.items())
             .sort(KEY))
    stats.rows_out = table.height
    return table, stats


def correct_first(scores: pl.DataFrame) -> pl.DataFrame:
    """Scores over correct and incorrect completions (the hard split), shifted so that every
    correct completion outranks every incorrect one and the scorer orders within each.

    Questions without a correct completion are dropped (the paper filters pass@8 = 0).
    """
    if "correct" not in scores.columns:
        raise ValueError("scores table lacks the 'correct' column")
    if scores["correct"].null_count():
        raise ValueError("scores table has rows without a 'correct' flag")
    correct = pl.col("correct").cast(pl.Boolean)
    kept = scores.filter(correct.any().over("question_id"))
    values = kept["score"].cast(pl.Float64).drop_nulls().drop_nans()
    span = float(values.max() - values.min()) if len(values) else 0.0  # type: ignore[operator]
    shifted = pl.col("score").cast(pl.Float64) + correct.cast(pl.Float64) * (span + 1.0)
    return kept.with_columns(shifted.alias("score"))


def sft_set(pool: pl.DataFrame, question_ids: set[str]) -> Built:
    """Every correct completion of the split's questions (the paper's SFT baseline)."""
    stats = BuildStats(questions_in=len(question_ids))
    ids = pl.Series(sorted(question_ids), dtype=pl.String)
    rows = pool.filter(pl.col("question_id").is_in(ids.implode())
                       & pl.col("correct").cast(pl.Boolean))
    table = rows.select(pl.col(name).cast(dtype) for name, dtype in SFT_SCHEMA.items()).sort(KEY)
    stats.rows_out = table.height
    return table, stats


def raft_set(pool: pl.DataFrame, scores: pl.DataFrame, seed: int = 0) -> Built:
    """SFT on the scorer's argmax only (RAFT, σ-RRHF with λ=0); ties broken at random."""
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    rows = []
    for group in _question_groups(_scored(pool, scores)):
        stats.questions_in += 1
        top = max(r["score"] for r in group)
        pick = _pick(_by_sample([r for r in group if r["score"] == top]), rng)
        rows.append({"question_id": pick["question_id"], "sample_index": int(pick["sample_index"]),
                     "prompt": pick["prompt"], "completion": pick["completion"]})
    stats.rows_out = len(rows)
    return pl.DataFrame(rows, schema=SFT_SCHEMA), stats


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def correctness_pairs(
    pool: pl.DataFrame,
    question_ids: set[str],
    scores: pl.DataFrame | None = None,
    seed: int = 0,
    shuffled: bool = False,
) -> Built:
    """Hard split (App. C.1): a correct y_w against an incorrect y_l.

    Without ``scores``: both drawn uniformly at random ("Random"). With the self-judge's
    scores over all completions: y_w = best-scored correct, y_l = worst-scored incorrect.
    Questions without both a correct and an incorrect completion (pass@8 = 0, or all correct)
    are skipped and counted.

    ``shuffled`` (not in the paper; the hard split's known-signal control, docs/testbed.md):
    the random pairs, the same ones, with chosen and rejected swapped on a random half of the
    questions (half rounded down, drawn from their own seed), so the pairs no longer say which
    completion is correct. DPO on the random pairs against DPO on these is DPO's control for
    the hard split: the one signal it is asked to learn there, correctness, planted or taken
    away.
    """
    if shuffled and scores is not None:
        raise ValueError("correctness_pairs: shuffled pairs are the random pairs swapped; "
                         "they take no scores")
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    ids = pl.Series(sorted(question_ids), dtype=pl.String)
    rows = pool.filter(pl.col("question_id").is_in(ids.implode()))
    if scores is not None:
        rows = rows.join(scores.select(*KEY, "score"), on=KEY, how="left",
                         maintain_order="left")
    out = []
    for group in _question_groups(rows):
        stats.questions_in += 1
        right = _by_sample([r for r in group if r["correct"]])
        wrong = _by_sample([r for r in group if not r["correct"]])
        if not right:
            stats.skip("no_correct_completion")
            continue
        if not wrong:
            stats.skip("no_incorrect_completion")
            continue
        if scores is None:
            chosen, rejected = _pick(right, rng), _pick(wrong, rng)
        else:
            if any(_missing(r["score"]) for r in right + wrong):
                stats.skip("unscored_completion")
                continue
            top = max(r["score"] for r in right)
            low = min(r["score"] for r in wrong)
            chosen = _pick([r for r in right if r["score"] == top], rng)
            rejected = _pick([r for r in wrong if r["score"] == low], rng)
        out.append(_record(chosen["prompt"], chosen, rejected))
    if shuffled:
        swap = set(random.Random(f"{seed}-swap").sample(range(len(out)), len(out) // 2))
        out = [_swapped(r) if i in swap else r for i, r in enumerate(out)]
        for _ in swap:
            stats.adjust("chosen_and_rejected_swapped")
    stats.rows_out = len(out)
    return pl.DataFrame(out, schema=PAIR_SCHEMA), stats


def _swapped(record: Row) -> Row:
    """A pair record with its chosen and rejected sides exchanged (every ``chosen*`` column
    trades places with its ``rejected*`` twin)."""
    out = dict(record)
    for key in record:
        if key.startswith("chosen"):
            twin = "rejected" + key[len("chosen"):]
            out[key], out[twin] = record[twin], record[key]
    return out
