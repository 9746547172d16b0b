"""Difficulty partitions of App. A.1, from a generation pool's per-completion rows.

On D: saturated (p=1) and hard (p<=1/4); the middle is excluded from training. On D'
(strictly easier): strict-saturated (p=1). p is the empirical pass@1 over the n samples.
"""

from __future__ import annotations

import pandas as pd

SATURATED, HARD, MIDDLE = "saturated", "hard", "middle"
STRICT_SATURATED, STRICT_OTHER = "strict_saturated", "strict_excluded"
TRAINING_SPLITS = (SATURATED, HARD, STRICT_SATURATED)

QUESTION_COLUMNS = ["question_id", "task", "pool", "cell", "terms", "digits"]


def per_question(pool: pd.DataFrame) -> pd.DataFrame:
    """One row per question: samples, correct samples and p-hat."""
    if pool.empty:
        raise ValueError("generation pool is empty: nothing to partition")
    missing = {"question_id", "correct", "pool"} - set(pool.columns)
    if missing:
        raise ValueError(f"generation pool lacks columns {sorted(missing)}")
    keys = [c for c in QUESTION_COLUMNS if c in pool.columns]
    grouped = pool.groupby(keys, dropna=False, sort=False)["correct"]
    table = grouped.agg(n_samples="count", n_correct="sum").reset_index()
    table["n_correct"] = table["n_correct"].astype(int)
    table["p_hat"] = table["n_correct"] / table["n_samples"]
    return table


def assign_split(pool_name: str, p_hat: float, saturated_min: float, hard_max: float) -> str:
    if pool_name == "D_prime":
        return STRICT_SATURATED if p_hat >= saturated_min else STRICT_OTHER
    if p_hat >= saturated_min:
        return SATURATED
    if p_hat <= hard_max:
        return HARD
    return MIDDLE


def partition(
    pool: pd.DataFrame, saturated_min: float = 1.0, hard_max: float = 0.25
) -> pd.DataFrame:
    """Per-question table with a ``split`` column."""
    table = per_question(pool)
    table["split"] = [
        assign_split(p, x, saturated_min, hard_max)
        for p, x in zip(table["pool"], table["p_hat"], strict=True)
    ]
    return table


def split_counts(table: pd.DataFrame) -> dict[str, int]:
    counts = table["split"].value_counts().to_dict()
    return {name: int(counts.get(name, 0)) for name in
            (SATURATED, HARD, MIDDLE, STRICT_SATURATED, STRICT_OTHER)}


def pass_at_1_grid(table: pd.DataFrame, pool_name: str) -> pd.DataFrame:
    """Mean p-hat per (terms, digits) cell of one pool: rows terms, columns digits."""
    rows = table[table["pool"] == pool_name]
    if rows.empty or "terms" not in rows:
        return pd.DataFrame()
    return rows.pivot_table(index="terms", columns="digits", values="p_hat", aggfunc="mean")


def grid_markdown(grid: pd.DataFrame, title: str) -> str:
    """The paper's Table 6 layout: terms down, digits across, pass@1 in %."""
    if grid.empty:
        return f"**{title}**: no cells\n"
    header = "| terms / digits | " + " | ".join(str(c) for c in grid.columns) + " |"
    rule = "|---" * (len(grid.columns) + 1) + "|"
    lines = [f"**{title}**", "", header, rule]
    for terms, row in grid.iterrows():
        cells = ["" if pd.isna(v) else f"{100 * v:.0f}" for v in row]
        lines.append(f"| {terms} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
