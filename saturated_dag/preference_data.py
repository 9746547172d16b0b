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


def dpo_pairs(pool: pd.DataFrame, scores: pd.DataFrame, seed: int = 0) -> Built:
    """y_w = argmax, y_l = argmin of the scores; ties broken at random; all-equal skipped.

    Two samples can have the same text (a small model's bare-answer style); a pair of equal
    texts carries no preference, so y_l is the lowest-scored completion whose text differs
    from y_w (counted as ``adjusted_rejected_text_equal_to_chosen`` when that is not the
    argmin), and a question whose completions all share y_w's text is skipped.
    """
    rng = random.Random(seed)
    stats = BuildStats(seed=seed)
    rows = []
    for _qid, group in _scored(pool, scores).groupby("question_id", sort=True):
        stats.questions_in += 1
        if len(group) < 2:
            stats.skip("fewer_than_two_completions")
            continue
        top, bottom = group["score"].max(), group["score"].min()
        if top == bottom:
            stats.skip("all_scores_equal")
            continue
        best = group[group["score"] == top].sort_values("sample_index")
        chosen = best.iloc[rng.randrange(len(best))]
        others = group[group["completion"] != chosen["completion"]]
        if others.empty:
            stats.skip("all_completions_same_text")
            continue
        lowest = others["score"].min()
        if lowest == top:
            stats.skip("all_scores_equal")
            continue
        if lowest != bottom:
            stats.adjust("rejected_text_equal_to_chosen")
        worst = others[others["score"] == lowest].sort_values("sample_index")
        rejected = worst.iloc[rng.randrange(len(worst))]
        rows.append(_record(chosen["prompt"], chosen, rejected))
    stats.rows_out = len(rows)
    return pd.DataFrame(rows), stats


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
