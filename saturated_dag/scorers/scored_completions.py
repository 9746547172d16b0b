"""Which completions each quality scorer scores, and the check that every one got a score.

Why one rule for every scorer: the agreement table and the preference datasets compare
scorers on identical completions. Correct completions of the saturated splits are what the
paper ranks (Sec. 3.2); every completion of a hard question with p-hat > 0 is scored too, so a
later stage can pair the self-judge's best correct completion with its worst incorrect one.

Order is part of the contract: the random scorer draws per question and the tournaments
schedule pairs by position, so ``ScoredCompletions.groups`` yields questions sorted by
``(question_id, split)`` and each question's rows sorted by ``sample_index``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

SCORE_COLUMNS = ["question_id", "sample_index", "split", "correct", "scorer", "score"]
"""Every scorer's output starts with these; scorer-specific columns follow."""

GROUP_KEYS = ["question_id", "split"]


def sorted_groups(frame: pl.DataFrame, keys: Sequence[str],
                  within: Sequence[str] = ()) -> list[tuple[tuple, pl.DataFrame]]:
    """``(key values, rows)`` per distinct ``keys``, keys ascending, rows sorted by ``within``
    and otherwise in their original order (pandas ``groupby(sort=True)``, which polars'
    ``group_by`` does not reproduce by itself)."""
    if frame.height == 0:
        return []
    ordered = frame.sort([*keys, *within], maintain_order=True)
    parts = ordered.partition_by(list(keys), maintain_order=True, as_dict=True)
    return list(parts.items())


@dataclass
class ScoredCompletions:
    """The scored completions (pool rows plus ``split``) and what was skipped, by rule."""

    rows: pl.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)

    def groups(self) -> list[tuple[str, str, pl.DataFrame]]:
        """``(question_id, split, rows sorted by sample_index)`` per question, in a stable order."""
        return [(str(qid), str(split), rows) for (qid, split), rows
                in sorted_groups(self.rows, GROUP_KEYS, ["sample_index"])]


def _question_sizes(rows: pl.DataFrame) -> pl.Series:
    """Per row: how many rows its question has (the candidates a ranking would compare)."""
    return rows.select(pl.len().over("question_id").alias("size")).to_series()


def _none_correct(partitions: pl.DataFrame, split: str) -> int:
    """Questions of ``split`` with no correct completion."""
    return partitions.filter((pl.col("split") == split) & (pl.col("n_correct") == 0)).height


def completions_to_score(
    pool: pl.DataFrame,
    partitions: pl.DataFrame,
    correct_splits: Sequence[str],
    all_completion_splits: Sequence[str] = (),
    min_completions: int = 2,
) -> ScoredCompletions:
    """Completions to score: correct ones of ``correct_splits``; all of ``all_completion_splits``
    for questions with at least one correct completion. Questions with fewer than
    ``min_completions`` candidates are skipped and counted (a ranking needs two)."""
    overlap = set(correct_splits) & set(all_completion_splits)
    if overlap:
        raise ValueError(f"splits {sorted(overlap)} cannot be both correct-only and all-completion")
    splits = partitions.select("question_id", "split", "n_correct")
    duplicated = splits.filter(pl.col("question_id").is_duplicated())["question_id"].unique()
    if len(duplicated):
        raise ValueError(f"difficulty partitions list questions more than once: "
                         f"{sorted(duplicated.to_list())[:5]}; expected one row per question")
    merged = pool.join(splits, on="question_id", how="inner", maintain_order="left")
    skipped: dict[str, int] = {}
    parts = []
    for split in correct_splits:
        rows = merged.filter((pl.col("split") == split) & pl.col("correct").cast(pl.Boolean))
        big = _question_sizes(rows) >= min_completions
        few = rows.filter(~big)["question_id"].n_unique()
        skipped[f"{split}_fewer_than_{min_completions}_correct"] = (
            int(few) + _none_correct(partitions, split))
        parts.append(rows.filter(big))
    for split in all_completion_splits:
        rows = merged.filter((pl.col("split") == split) & (pl.col("n_correct") > 0))
        big = _question_sizes(rows) >= min_completions
        skipped[f"{split}_no_correct"] = _none_correct(partitions, split)
        skipped[f"{split}_fewer_than_{min_completions}_completions"] = int(
            rows.filter(~big)["question_id"].n_unique())
        parts.append(rows.filter(big))
    rows = pl.concat(parts, how="vertical") if parts else merged.head(0)
    rows = rows.drop("n_correct").sort(["question_id", "sample_index"], maintain_order=True)
    return ScoredCompletions(rows, skipped)


def score_frame(rows: pl.DataFrame, scorer: str, scores: Sequence[float] | np.ndarray | pl.Series,
                extra: dict[str, Sequence | np.ndarray | pl.Series] | None = None
                ) -> pl.DataFrame:
    """The common output layout: one row per scored completion (``SCORE_COLUMNS``, then
    ``extra`` in its order)."""
    values = np.asarray(scores, dtype=float)
    if len(values) != rows.height:
        raise ValueError(f"{scorer}: {len(values)} scores for {rows.height} selected completions")
    frame = rows.select(
        pl.col("question_id"),
        pl.col("sample_index").cast(pl.Int64),
        pl.col("split"),
        pl.col("correct").cast(pl.Boolean),
        pl.lit(scorer, dtype=pl.String).alias("scorer"),
    ).with_columns(pl.Series("score", values, dtype=pl.Float64))
    if extra:
        frame = frame.with_columns([pl.Series(name, _values(column))
                                    for name, column in extra.items()])
    return frame


def _values(column: Sequence | np.ndarray | pl.Series) -> np.ndarray | pl.Series | list:
    """An extra column as polars reads it best: arrays and Series as they are, else a list."""
    return column if isinstance(column, (np.ndarray, pl.Series)) else list(column)


def missing_or_nonfinite(scores: pl.DataFrame, completions: ScoredCompletions) -> dict[str, int]:
    """Selected completions without a finite score (the asset checks' rule): a missing row,
    a null or a NaN score counts as missing, an infinite one as non-finite."""
    keys = [pl.col("question_id").cast(pl.String), pl.col("sample_index").cast(pl.Int64)]
    expected = completions.rows.select(keys)
    scored = scores.select(*keys, pl.col("score").cast(pl.Float64))
    merged = expected.join(scored, on=["question_id", "sample_index"], how="left")
    score = pl.col("score")
    counts = merged.select(
        missing=(score.is_null() | score.is_nan().fill_null(False)).sum(),
        nonfinite=score.is_infinite().fill_null(False).sum(),
    ).row(0, named=True)
    return {"expected": expected.height, "missing": int(counts["missing"]),
            "nonfinite": int(counts["nonfinite"])}
