"""The paper's selection protocol (App. B): a cell trains every configuration of its grid and
reports the one with the best validation pass@1. The project's selection rules live here, and
only here: App. B's argmax (``best``) and the one-standard-error rule (``one_se``) that the
testbed chooses each method's recipe by (``choose``).

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

import numpy as np
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
    best = best_index(means)
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


RULES = ("best", "one_se")
"""The selection rules: App. B's highest validation pass@1, and the one-standard-error rule."""


def best_index(means: Sequence[float]) -> int:
    """App. B's argmax: the highest mean validation pass@1, the first listed of equals (the
    grid lists smaller steps first); rounded so float noise in a mean does not break a tie."""
    return max(range(len(means)), key=lambda i: (round(means[i], 9), -i))


def choose(validation: Sequence[pl.DataFrame], steps: Sequence[float], rule: str
           ) -> tuple[int, list[tuple[float, float]]]:
    """The index of the configuration ``rule`` picks from each configuration's per-question
    validation results (``question_id, n, correct``; the same questions for every one, in
    grid order), and per configuration (points behind the best, the paired standard error of
    that gap).

    ``best``: the highest validation pass@1 (App. B, ``best_index``). ``one_se``: the
    one-standard-error rule (Hastie, Tibshirani and Friedman, *The Elements of Statistical
    Learning*, §7.10): among the configurations within one paired standard error of the best,
    the smallest step (``steps``: each one's learning rate), then the best score -- a
    difference the validation set cannot resolve does not buy a larger step, which also moves
    the model where the signal is noise (docs/testbed.md)."""
    if rule not in RULES:
        raise ValueError(f"unknown selection rule {rule!r}; known: {', '.join(RULES)}")
    if len(validation) != len(steps) or not validation:
        raise ValueError(f"{len(validation)} validation tables for {len(steps)} configurations")
    order = sorted(validation[0]["question_id"].to_list())
    rates = []
    for table in validation:
        by_id = dict(zip(table["question_id"], (table["correct"] / table["n"]).to_list(),
                         strict=True))
        rates.append(np.array([by_id[q] for q in order]))
    means = [100 * float(r.mean()) for r in rates]
    best = best_index(means)
    margins = []
    for i, r in enumerate(rates):
        diff = 100 * (rates[best] - r)
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        margins.append((means[best] - means[i], se))
    if rule == "best":
        return best, margins
    within = [i for i in range(len(steps)) if margins[i][0] <= margins[i][1]]
    return min(within, key=lambda i: (steps[i], -means[i])), margins
