"""The paper's selection protocol (App. B): a cell trains every configuration of its grid and
reports the one with the best validation pass@1.

Each configuration's validation pass@1 is that of its kept checkpoint (the best epoch of its
own run, ``training/train.py``), averaged over its training-seed replicates. The winner is the
highest mean; a tie goes to the configuration listed first (the grid's order), so the choice
is a function of the results alone. Validation questions are disjoint from the eval set
(``tasks.validation_questions``), so choosing on them does not look at the reported numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

SETTINGS = ("learning_rate", "epochs", "batch_size", "dpo_beta", "rrhf_rank_weight")
"""The grid's settings, as columns of a selection table."""


@dataclass(frozen=True)
class Trained:
    """One configuration's replicates: the validation pass@1 (fraction) and kept epoch of
    each training seed."""

    adapter: str
    settings: dict[str, Any]
    validation: Sequence[float]
    best_epochs: Sequence[int]


def selection_table(configurations: Sequence[Trained]) -> pl.DataFrame:
    """One row per configuration (grid order): its settings, seeds, kept epochs, mean
    validation pass@1 (%) and whether it is the chosen one (exactly one row)."""
    if not configurations:
        raise ValueError("a selection needs at least one trained configuration")
    means = []
    for c in configurations:
        if not c.validation or len(c.validation) != len(c.best_epochs):
            raise ValueError(f"configuration {c.adapter}: no validation result per seed")
        means.append(100 * sum(c.validation) / len(c.validation))
    # first of equals; rounded so float noise in a mean does not break a tie
    best = max(range(len(means)), key=lambda i: (round(means[i], 9), -i))
    return pl.DataFrame({
        "configuration": [c.adapter for c in configurations],
        **{name: pl.Series(name, [c.settings.get(name) for c in configurations],
                           pl.Int64 if name in ("epochs", "batch_size") else pl.Float64)
           for name in SETTINGS},
        "seeds": pl.Series([len(c.validation) for c in configurations], dtype=pl.Int64),
        "best epochs": [",".join(str(e) for e in c.best_epochs) for c in configurations],
        "validation pass@1": pl.Series(means, dtype=pl.Float64),
        "chosen": [i == best for i in range(len(configurations))],
    })


def chosen(table: pl.DataFrame) -> str:
    """The chosen configuration's adapter name."""
    rows = table.filter(pl.col("chosen"))["configuration"].to_list()
    if len(rows) != 1:
        raise ValueError(f"a selection table must mark exactly one configuration chosen, "
                         f"found {len(rows)}")
    return rows[0]
