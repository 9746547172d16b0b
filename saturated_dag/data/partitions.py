"""Difficulty partitions of App. A.1, from a generation pool's per-completion rows.

On D: saturated (p=1) and hard (p<=1/4); the middle is excluded from training. On D_prime
(strictly easier): strict_saturated (p=1). p is the empirical pass@1 over the n samples.
Frames are polars; questions keep the pool's order of first appearance.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

SATURATED, HARD, MIDDLE = "saturated", "hard", "middle"
STRICT_SATURATED, STRICT_OTHER = "strict_saturated", "strict_excluded"
TRAINING_SPLITS = (SATURATED, HARD, STRICT_SATURATED)

QUESTION_COLUMNS = ["question_id", "task", "pool", "cell", "terms", "digits"]


def per_question(pool: pl.DataFrame) -> pl.DataFrame:
    """One row per question: samples, correct samples and p-hat (questions in pool order)."""
    if pool.is_empty():
        raise ValueError("generation pool is empty: nothing to partition")
    missing = {"question_id", "correct", "pool"} - set(pool.columns)
    if missing:
        raise ValueError(f"generation pool lacks columns {sorted(missing)}")
    keys = [c for c in QUESTION_COLUMNS if c in pool.columns]
    table = pool.group_by(keys, maintain_order=True).agg(
        n_samples=pl.col("correct").count().cast(pl.Int64),
        n_correct=pl.col("correct").cast(pl.Int64).sum().cast(pl.Int64),
    )
    return table.with_columns(p_hat=pl.col("n_correct") / pl.col("n_samples"))


def assign_split(pool_name: str, p_hat: float, saturated_min: float, hard_max: float) -> str:
    if pool_name == "D_prime":
        return STRICT_SATURATED if p_hat >= saturated_min else STRICT_OTHER
    if p_hat >= saturated_min:
        return SATURATED
    if p_hat <= hard_max:
        return HARD
    return MIDDLE


def partition(
    pool: pl.DataFrame, saturated_min: float = 1.0, hard_max: float = 0.25
) -> pl.DataFrame:
    """Per-question table with a ``split`` column."""
    table = per_question(pool)
    splits = [assign_split(p, x, saturated_min, hard_max)
              for p, x in zip(table["pool"], table["p_hat"], strict=True)]
    return table.with_columns(pl.Series("split", splits, dtype=pl.String))


def split_counts(table: pl.DataFrame) -> dict[str, int]:
    counts = Counter(table["split"].to_list())
    return {name: int(counts.get(name, 0)) for name in
            (SATURATED, HARD, MIDDLE, STRICT_SATURATED, STRICT_OTHER)}


GRID_INDEX = "terms"
"""The grid's first column; the others are the digits, named ``str(digits)``."""


def pass_at_1_grid(table: pl.DataFrame, pool_name: str) -> pl.DataFrame:
    """Mean p-hat per (terms, digits) grid point of one pool: one row per terms value
    (ascending), then one column per digits value (ascending as numbers, named by its text); a
    grid point the pool lacks is null. An empty frame when the pool has no grid points (e.g.
    GSM8K)."""
    if "terms" not in table.columns or "digits" not in table.columns:
        return pl.DataFrame()
    rows = table.filter((pl.col("pool") == pool_name) & pl.col("terms").is_not_null()
                        & pl.col("digits").is_not_null())
    if rows.is_empty():
        return pl.DataFrame()
    digits = rows["digits"].unique().sort()
    grid = rows.pivot(on="digits", on_columns=digits, index="terms", values="p_hat",
                      aggregate_function="mean")
    return grid.sort(GRID_INDEX).select(GRID_INDEX, *(str(d) for d in digits))


def grid_markdown(grid: pl.DataFrame, title: str) -> str:
    """The paper's Table 6 layout: terms down, digits across, pass@1 in %."""
    if grid.is_empty():
        return f"**{title}**: no grid points\n"
    digits = [c for c in grid.columns if c != GRID_INDEX]
    header = "| terms / digits | " + " | ".join(digits) + " |"
    rule = "|---" * (len(digits) + 1) + "|"
    lines = [f"**{title}**", "", header, rule]
    for terms, *row in grid.select(GRID_INDEX, *digits).iter_rows():
        cells = ["" if v is None else f"{100 * v:.0f}" for v in row]
        lines.append(f"| {terms} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
