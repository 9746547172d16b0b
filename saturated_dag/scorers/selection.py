"""Which completions each quality scorer scores, and the check that every one got a score.

Why one rule for every scorer: the agreement table and the preference datasets compare
scorers on identical completions. Correct completions of the saturated splits are what the
paper ranks (Sec. 3.2); every completion of a hard question with p-hat > 0 is scored too, so a
later stage can pair the self-judge's best correct completion with its worst incorrect one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SCORE_COLUMNS = ["question_id", "sample_index", "split", "correct", "scorer", "score"]
"""Every scorer's output starts with these; scorer-specific columns follow."""


@dataclass
class Selection:
    """The scored completions (pool rows plus ``split``) and what was skipped, by rule."""

    rows: pd.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)

    def groups(self) -> list[tuple[str, str, pd.DataFrame]]:
        """``(question_id, split, rows sorted by sample_index)`` per question, in a stable order."""
        out = []
        for (qid, split), rows in self.rows.groupby(["question_id", "split"], sort=True):
            out.append((str(qid), str(split), rows.sort_values("sample_index")))
        return out


def select_completions(
    pool: pd.DataFrame,
    partitions: pd.DataFrame,
    correct_splits: Sequence[str],
    all_completion_splits: Sequence[str] = (),
    min_completions: int = 2,
) -> Selection:
    """Completions to score: correct ones of ``correct_splits``; all of ``all_completion_splits``
    for questions with at least one correct completion. Questions with fewer than
    ``min_completions`` candidates are skipped and counted (a ranking needs two)."""
    overlap = set(correct_splits) & set(all_completion_splits)
    if overlap:
        raise ValueError(f"splits {sorted(overlap)} cannot be both correct-only and all-completion")
    splits = partitions[["question_id", "split", "n_correct"]]
    merged = pool.merge(splits, on="question_id", how="inner", validate="many_to_one")
    skipped: dict[str, int] = {}
    parts = []
    for split in correct_splits:
        rows = merged[(merged["split"] == split) & merged["correct"].astype(bool)]
        sizes = rows.groupby("question_id")["sample_index"].transform("count")
        few = rows.loc[sizes < min_completions, "question_id"].nunique()
        none = int(((partitions["split"] == split) & (partitions["n_correct"] == 0)).sum())
        skipped[f"{split}_fewer_than_{min_completions}_correct"] = int(few) + none
        parts.append(rows[sizes >= min_completions])
    for split in all_completion_splits:
        rows = merged[(merged["split"] == split) & (merged["n_correct"] > 0)]
        sizes = rows.groupby("question_id")["sample_index"].transform("count")
        skipped[f"{split}_no_correct"] = int(
            ((partitions["split"] == split) & (partitions["n_correct"] == 0)).sum())
        skipped[f"{split}_fewer_than_{min_completions}_completions"] = int(
            rows.loc[sizes < min_completions, "question_id"].nunique())
        parts.append(rows[sizes >= min_completions])
    rows = pd.concat(parts, ignore_index=True) if parts else merged.iloc[0:0]
    rows = rows.drop(columns=["n_correct"]).sort_values(["question_id", "sample_index"])
    return Selection(rows.reset_index(drop=True), skipped)


def score_frame(rows: pd.DataFrame, scorer: str, scores: Sequence[float],
                extra: dict[str, Sequence] | None = None) -> pd.DataFrame:
    """The common output layout: one row per scored completion."""
    frame = pd.DataFrame({
        "question_id": rows["question_id"].to_numpy(),
        "sample_index": rows["sample_index"].astype(int).to_numpy(),
        "split": rows["split"].to_numpy(),
        "correct": rows["correct"].astype(bool).to_numpy(),
        "scorer": scorer,
        "score": np.asarray(scores, dtype=float),
    })
    for name, values in (extra or {}).items():
        frame[name] = list(values)
    return frame


def missing_or_nonfinite(scores: pd.DataFrame, selection: Selection) -> dict[str, int]:
    """Selected completions without a finite score (the asset checks' rule)."""
    expected = selection.rows[["question_id", "sample_index"]]
    merged = expected.merge(scores[["question_id", "sample_index", "score"]],
                            on=["question_id", "sample_index"], how="left")
    return {
        "expected": len(expected),
        "missing": int(merged["score"].isna().sum()),
        "nonfinite": int((~np.isfinite(merged["score"].fillna(0.0).to_numpy())).sum()),
    }
