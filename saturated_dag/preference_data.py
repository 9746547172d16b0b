"""Training sets built from scores (Sec. 3.3-3.4, App. C.1): DPO pairs, σ-RRHF groups, SFT.

Inputs are a generation pool (one row per completion) and a scores table (question_id,
sample_index, score). Every rule that drops a question is counted in the returned stats, and
random choices (ties at the top or bottom) draw from a recorded seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

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


Built = tuple[pd.DataFrame, BuildStats]


def _scored(pool: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    missing = {"question_id", "sample_index", "score"} - set(scores.columns)
    if missing:
        raise ValueError(f"scores table lacks columns {sorted(missing)}")
    merged = scores[[*KEY, "score"]].merge(pool, on=KEY, how="left", validate="one_to_one")
    if merged["completion"].isna().any():
        raise ValueError("scores refer to completions that are not in the generation pool")
    if not np.isfinite(merged["score"].to_numpy(dtype=float)).all():
        bad = merged.loc[~np.isfinite(merged["score"].astype(float)), "question_id"].iloc[0]
        raise ValueError(f"non-finite score for question {bad}")
    return merged


def _record(prompt: str, chosen: pd.Series, rejected: pd.Series | None = None) -> dict:
    row = {"question_id": chosen["question_id"], "prompt": prompt,
           "chosen": chosen["completion"], "chosen_sample": int(chosen["sample_index"]),
           "chosen_score": float(chosen["score"]) if "score" in chosen else None}
    if rejected is not None:
        row.update({"rejected": rejected["completion"],
                    "rejected_sample": int(rejected["sample_index"]),
                    "rejected_score": float(rejected["score"]) if "score" in rejected else None})
    return row


def dpo_pairs(
    pool: pd.DataFrame, scores: pd.DataFrame, seed: int = 0, distinct_texts: bool = False
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
    for _qid, group in _scored(pool, scores).groupby("question_id", sort=True):
        stats.questions_in += 1
        if len(group) < 2:
            stats.skip("fewer_than_two_completions")
            continue
        group = group.sort_values("sample_index")
        if group["score"].max() == group["score"].min():
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
    return pd.DataFrame(rows), stats


Pair = tuple[pd.Series, pd.Series]


def _pick(rows: pd.DataFrame, rng: random.Random) -> pd.Series:
    """One row uniformly at random (rows in sample order, so the draw is reproducible)."""
    return rows.iloc[rng.randrange(len(rows))]


def _argmax_argmin_pair(group: pd.DataFrame, rng: random.Random) -> Pair:
    """The paper's pair: a random argmax against a random argmin."""
    scores = group["score"]
    chosen = _pick(group[scores == scores.max()], rng)
    return chosen, _pick(group[scores == scores.min()], rng)


def _distinct_text_pair(group: pd.DataFrame, rng: random.Random,
                        stats: BuildStats) -> Pair | None:
    """A top-scored y_w and the lowest-scored y_l with a different text (None: no such pair)."""
    scores, texts = group["score"], group["completion"]
    top = scores.max()
    below = group[scores < top]
    best = group[scores == top]
    # for each top-scored candidate, the lowest score among lower-scored different texts
    lowest = pd.Series({i: below.loc[below["completion"] != texts[i], "score"].min()
                        for i in best.index}).dropna()
    if lowest.empty:
        return None
    floor = lowest.min()
    candidates = best.loc[lowest.index[lowest == floor]]
    if len(candidates) < len(best):
        stats.adjust("chosen_tie_restricted_to_distinct_text")
    chosen = _pick(candidates, rng)
    if floor != scores.min():
        stats.adjust("rejected_text_equal_to_chosen")
    worst = below[(below["completion"] != chosen["completion"]) & (below["score"] == floor)]
    return chosen, _pick(worst, rng)


def rrhf_groups(pool: pd.DataFrame, scores: pd.DataFrame) -> Built:
    """All scored completions of a question with their scores (one row per completion)."""
    stats = BuildStats()
    merged = _scored(pool, scores)
    keep = []
    for _qid, group in merged.groupby("question_id", sort=True):
        stats.questions_in += 1
        if len(group) < 2:
            stats.skip("fewer_than_two_completions")
            continue
        keep.append(group)
    if not keep:
        return pd.DataFrame(columns=["question_id", "prompt", "completion", "score"]), stats
    table = pd.concat(keep)[["question_id", "sample_index", "prompt", "completion", "score"]]
    stats.rows_out = len(table)
    return table.sort_values(KEY).reset_index(drop=True), stats


def correct_first(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores over correct and incorrect completions (the hard split), shifted so that every
    correct completion outranks every incorrect one and the scorer orders within each.

    Questions without a correct completion are dropped (the paper filters pass@8 = 0).
    """
    if "correct" not in scores.columns:
        raise ValueError("scores table lacks the 'correct' column")
    correct = scores["correct"].astype(bool)
    solved = scores.loc[correct, "question_id"].unique()
    kept = scores[scores["question_id"].isin(solved)].copy()
    values = kept["score"].astype(float)
    span = float(values.max() - values.min()) if len(values) else 0.0
    kept["score"] = values + kept["correct"].astype(bool) * (span + 1.0)
    return kept


def sft_set(pool: pd.DataFrame, question_ids: set[str]) -> Built:
    """Every correct completion of the split's questions (the paper's SFT baseline)."""
    stats = BuildStats(questions_in=len(question_ids))
    rows = pool[pool["question_id"].isin(question_ids) & pool["correct"].astype(bool)]
    table = rows[["question_id", "sample_index", "prompt", "completion"]].sort_values(KEY)
    stats.rows_out = len(table)
    return table.reset_index(drop=True), stats


def raft_set(pool: pd.DataFrame, scores: pd.DataFrame, seed: int = 0) -> Built:
    """SFT on the scorer's argmax only (RAFT, σ-RRHF with λ=0); ties broken at random."""
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    rows = []
    for _qid, group in _scored(pool, scores).groupby("question_id", sort=True):
        stats.questions_in += 1
        best = group[group["score"] == group["score"].max()].sort_values("sample_index")
        pick = best.iloc[rng.randrange(len(best))]
        rows.append({"question_id": pick["question_id"], "sample_index": int(pick["sample_index"]),
                     "prompt": pick["prompt"], "completion": pick["completion"]})
    stats.rows_out = len(rows)
    return pd.DataFrame(rows), stats


def correctness_pairs(
    pool: pd.DataFrame,
    question_ids: set[str],
    scores: pd.DataFrame | None = None,
    seed: int = 0,
) -> Built:
    """Hard split (App. C.1): a correct y_w against an incorrect y_l.

    Without ``scores``: both drawn uniformly at random ("Random"). With the self-judge's
    scores over all completions: y_w = best-scored correct, y_l = worst-scored incorrect.
    Questions without both a correct and an incorrect completion (pass@8 = 0, or all correct)
    are skipped and counted.
    """
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    rows = pool[pool["question_id"].isin(question_ids)]
    if scores is not None:
        rows = rows.merge(scores[[*KEY, "score"]], on=KEY, how="left")
    out = []
    for _qid, group in rows.groupby("question_id", sort=True):
        stats.questions_in += 1
        right = group[group["correct"].astype(bool)].sort_values("sample_index")
        wrong = group[~group["correct"].astype(bool)].sort_values("sample_index")
        if right.empty:
            stats.skip("no_correct_completion")
            continue
        if wrong.empty:
            stats.skip("no_incorrect_completion")
            continue
        if scores is None:
            chosen = right.iloc[rng.randrange(len(right))]
            rejected = wrong.iloc[rng.randrange(len(wrong))]
        else:
            if right["score"].isna().any() or wrong["score"].isna().any():
                stats.skip("unscored_completion")
                continue
            top = right[right["score"] == right["score"].max()]
            low = wrong[wrong["score"] == wrong["score"].min()]
            chosen, rejected = top.iloc[rng.randrange(len(top))], low.iloc[rng.randrange(len(low))]
        out.append(_record(chosen["prompt"], chosen, rejected))
    stats.rows_out = len(out)
    return pd.DataFrame(out), stats
