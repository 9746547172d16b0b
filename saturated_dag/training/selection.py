"""The paper's selection protocol (App. B): a cell trains every one of its configurations and
reports the one with the best validation pass@1. The project's selection rules live here, and
only here: App. B's argmax (``best``) and the one-standard-error rule (``one_se``) that the
testbed chooses each method's recipe by (``choose_index``), named by ``training.selection.rule``.

Each configuration's validation pass@1 is that of its kept checkpoint (the best epoch of its own
run, ``training/train.py``), averaged over its training-seed replicates. The winner is the highest
mean; a tie goes to the configuration listed first (``training.selection``'s order), so the choice
is a function of the results alone. Validation questions are disjoint from the eval set
(``tasks.validation_questions``), so choosing on them does not look at the reported numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

SETTINGS = ("learning_rate", "epochs", "batch_size", "dpo_loss_type", "dpo_beta",
            "dpo_nll_weight", "rrhf_rank_weight")
"""The settings a selection varies, as columns of a selection table."""
SETTING_TYPES = {"epochs": pl.Int64, "batch_size": pl.Int64, "dpo_loss_type": pl.String}
"""The selection table's column types other than ``pl.Float64``."""


@dataclass(frozen=True)
class Trained:
    """One configuration's replicates: the validation pass@1 (fraction) and kept epoch of
    each training seed, and (for the one-SE rule) each seed's per-question validation results
    at its kept epoch (``question_id, n, correct``). ``adapter`` is its seed-0 adapter's name
    (``Experiment.name``, what the eval report and the runs table look it up by);
    ``configuration`` its name on the cell's pages (``experiments.configuration_key``, its
    adapters' partition key without the seed), ``adapter`` when not given."""

    adapter: str
    settings: dict[str, Any]
    validation: Sequence[float]
    best_epochs: Sequence[int]
    per_question: Sequence[pl.DataFrame] = ()
    configuration: str | None = None


def selection_table(configurations: Sequence[Trained], rule: str = "best") -> pl.DataFrame:
    """One row per configuration (configuration order): its settings, seeds, kept epochs, mean
    validation pass@1 (%), and whether ``rule`` chose it (exactly one row). With the one-SE
    rule, also each one's points behind the best and the paired standard error of that gap
    (seed-averaged per-question rates, paired over the validation questions)."""
    if not configurations:
        raise ValueError("a selection needs at least one trained configuration")
    if rule not in RULES:
        raise ValueError(f"unknown selection rule {rule!r}; known: {', '.join(RULES)}")
    means = []
    for c in configurations:
        if not c.validation or len(c.validation) != len(c.best_epochs):
            raise ValueError(f"configuration {c.adapter}: no validation result per seed")
        means.append(100 * sum(c.validation) / len(c.validation))
    pick, margins = best_index(means), None
    if rule == "one_se":
        missing = [c.adapter for c in configurations
                   if len(c.per_question) != len(c.validation)]
        if missing:
            raise ValueError(f"the one-SE rule pairs per-question validation results, and "
                             f"configurations {missing} have none per seed")
        ids = {tuple(sorted(t["question_id"].to_list())) for c in configurations
               for t in c.per_question}
        if len(ids) != 1:
            raise ValueError("the configurations' validation results cover different questions")
        rates = [np.mean([_rates(t) for t in c.per_question], axis=0) for c in configurations]
        steps = [c.settings.get("learning_rate") or 0.0 for c in configurations]
        pick, margins = choose_index(rates, steps, rule)
    return pl.DataFrame({
        "configuration": [c.configuration or c.adapter for c in configurations],
        "adapter": [c.adapter for c in configurations],
        **{name: pl.Series(name, [c.settings.get(name) for c in configurations],
                           SETTING_TYPES.get(name, pl.Float64))
           for name in SETTINGS},
        "seeds": pl.Series([len(c.validation) for c in configurations], dtype=pl.Int64),
        "best epochs": [",".join(str(e) for e in c.best_epochs) for c in configurations],
        "validation pass@1": pl.Series(means, dtype=pl.Float64),
        "behind the best": pl.Series([None] * len(configurations) if margins is None
                                     else [m[0] for m in margins], dtype=pl.Float64),
        "one standard error": pl.Series([None] * len(configurations) if margins is None
                                        else [m[1] for m in margins], dtype=pl.Float64),
        "chosen": [i == pick for i in range(len(configurations))],
    })


def _rates(table: pl.DataFrame) -> np.ndarray:
    """Per-question pass rates, in question-id order."""
    ordered = table.sort("question_id")
    return (ordered["correct"] / ordered["n"]).to_numpy()


def chosen_rows(table: pl.DataFrame | None) -> list[dict[str, Any]] | None:
    """The rows a selection table marks chosen (None for a cell without a selection): what
    ``experiments.chosen_recipe`` reads, which refuses anything but one row."""
    return None if table is None else table.filter(pl.col("chosen")).to_dicts()


def chosen(table: pl.DataFrame) -> str:
    """The chosen configuration's adapter name (its seed-0 adapter's ``Experiment.name``)."""
    if "adapter" not in table.columns:
        raise ValueError("this selection table has no adapter column (written by older code): "
                         "re-materialise the selection")
    rows = table.filter(pl.col("chosen"))["adapter"].to_list()
    if len(rows) != 1:
        raise ValueError(f"a selection table must mark exactly one configuration chosen, "
                         f"found {len(rows)}")
    return rows[0]


RULES = ("best", "one_se")
"""The selection rules: App. B's highest validation pass@1, and the one-standard-error rule."""


def best_index(means: Sequence[float]) -> int:
    """App. B's argmax: the highest mean validation pass@1, the first listed of equals (the
    selection lists smaller steps first); rounded so float noise in a mean does not break a tie."""
    return max(range(len(means)), key=lambda i: (round(means[i], 9), -i))


def choose_index(rates: Sequence[np.ndarray], steps: Sequence[float], rule: str
                 ) -> tuple[int, list[tuple[float, float]]]:
    """The index of the configuration ``rule`` picks from each configuration's per-question
    validation pass rates (the same questions, in the same order, for every one; configuration
    order), and per configuration (points behind the best, the paired standard error of
    that gap).

    ``best``: the highest validation pass@1 (App. B, ``best_index``). ``one_se``: the
    one-standard-error rule (Hastie, Tibshirani and Friedman, *The Elements of Statistical
    Learning*, §7.10): among the configurations within one paired standard error of the best,
    the smallest step (``steps``: each one's learning rate), then the best score -- a
    difference the validation set cannot resolve does not buy a larger step, which also moves
    the model where the signal is noise (docs/testbed.md)."""
    if rule not in RULES:
        raise ValueError(f"unknown selection rule {rule!r}; known: {', '.join(RULES)}")
    if len(rates) != len(steps) or not rates:
        raise ValueError(f"{len(rates)} validation results for {len(steps)} configurations")
    if len({len(r) for r in rates}) != 1:
        raise ValueError("the configurations were validated on different question sets")
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
