"""Methods at equal tuning budget: each cell's expected best validation pass@1 as a function
of the number of configurations tried (expected validation performance, Dodge et al. 2019,
*Show Your Work: Improved Reporting of Experimental Results*).

The paper reports each method's best configuration (App. B). Methods with different numbers
of configurations are not an equal comparison: DPO's selection adds β, so its best is a
maximum over more tries than σ-RRHF's. The expected maximum of ``k`` configurations drawn
from a cell's N without replacement puts every method on the same axis, ``k``:

    E[max of k] = Σ_i v_(i) · C(i − 1, k − 1) / C(N, k)

over the cell's N validation scores sorted ascending (v_(1) ≤ ... ≤ v_(N)): v_(i) is the
maximum of a k-subset exactly when the subset holds it and k − 1 of the i − 1 below it. The
95% interval resamples the cell's configurations (with replacement, ``RESAMPLES`` times) and
recomputes the curve: how much the curve owes to which configurations happened to be tried.
Two methods are compared at the largest budget both allow, each resampled independently
(their configurations are different runs). At k = N the estimate is the cell's best and the
interval's top (a resample's maximum never exceeds the best tried): with two configurations
the interval says little more than which of the two carried the maximum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb

import numpy as np
import polars as pl

from saturated_dag.evaluation.statistics import LEVEL

RESAMPLES = 2000
FLOAT_NOISE = 1e-9
"""Points below which an interval's edge counts as 0: a weighted sum of equal values can
land 7e-15 off the value, and a verdict reads the interval's sign."""


def expected_best(values: Sequence[float], k: int) -> float:
    """The expected maximum of ``k`` of ``values`` drawn without replacement."""
    n = len(values)
    if not 1 <= k <= n:
        raise ValueError(f"a budget of {k} configurations of {n}")
    ordered = sorted(values)
    total = comb(n, k)
    return float(sum(ordered[i] * comb(i, k - 1) for i in range(k - 1, n)) / total)


def _draws(values: Sequence[float], k: int, resamples: int,
           rng: np.random.Generator) -> np.ndarray:
    """``expected_best`` of ``k`` on ``resamples`` bootstrap resamples of the configurations."""
    array = np.asarray(values, dtype=float)
    picks = rng.integers(0, len(array), size=(resamples, len(array)))
    n = len(array)
    weights = np.array([comb(i, k - 1) for i in range(n)], dtype=float) / comb(n, k)
    return np.sort(array[picks], axis=1) @ weights


def curve(values: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL,
          seed: int = 0) -> list[tuple[int, float, float, float]]:
    """(k, expected best, low, high) for k = 1 ... N."""
    rng = np.random.default_rng(seed)
    tail = (1 - level) / 2
    out = []
    for k in range(1, len(values) + 1):
        draws = _draws(values, k, resamples, rng)
        low, high = np.quantile(draws, [tail, 1 - tail])
        out.append((k, expected_best(values, k), float(low), float(high)))
    return out


SCHEMA = {"split": pl.String, "method": pl.String, "scorer": pl.String, "cell": pl.String,
          "configurations tried": pl.Int64, "configurations in all": pl.Int64,
          "expected best validation pass@1": pl.Float64, "low": pl.Float64, "high": pl.Float64}


def budget_table(scores: Mapping[tuple[str, str, str, str], Sequence[float]],
                 resamples: int = RESAMPLES) -> pl.DataFrame:
    """One row per (cell, budget k): ``scores`` maps (split, method label, scorer, cell) to the
    cell's validation pass@1 per configuration (%, a selection table's column)."""
    rows = []
    for (split, method, scorer, cell), values in scores.items():
        for k, estimate, low, high in curve(values, resamples):
            rows.append({"split": split, "method": method, "scorer": scorer, "cell": cell,
                         "configurations tried": k, "configurations in all": len(values),
                         "expected best validation pass@1": estimate, "low": low,
                         "high": high})
    return pl.DataFrame(rows, schema=SCHEMA)


def equal_budget_delta(a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES,
                       level: float = LEVEL, seed: int = 0, k: int | None = None
                       ) -> tuple[int, float, float, float]:
    """Configurations ``a`` against configurations ``b`` at ``k`` configurations tried (None:
    the largest budget both allow, min(N_a, N_b)): (k, Δ of expected best, low, high), each
    side's configurations resampled on its own."""
    k = min(len(a), len(b)) if k is None else k
    rng = np.random.default_rng(seed)
    draws = _draws(a, k, resamples, rng) - _draws(b, k, resamples, rng)
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return k, expected_best(a, k) - expected_best(b, k), float(low), float(high)


BUDGETS = (1, 2, 4)
"""The budgets the equal-budget finding is read at: one configuration (a method as it comes),
two, four (a small tuning budget); each where both methods have that many."""


def _verdict(low: float, high: float) -> str:
    return "higher" if low > FLOAT_NOISE else "lower" if high < -FLOAT_NOISE else "inconclusive"


def _pairs(scores: Mapping[tuple[str, str, str, str], Sequence[float]], first: str,
           second: str) -> list[tuple[str, str, Sequence[float], Sequence[float]]]:
    """(split, scorer, ``first``'s values, ``second``'s values) for every split and scorer
    that both methods train."""
    by = {(split, method, scorer): values
          for (split, method, scorer, _), values in scores.items()}
    return [(split, scorer, values, by[(split, second, scorer)])
            for (split, method, scorer), values in by.items()
            if method == first and (split, second, scorer) in by]


def leads(scores: Mapping[tuple[str, str, str, str], Sequence[float]],
          budgets: Sequence[int] = BUDGETS, first: str = "σ-RRHF",
          second: str = "DPO") -> pl.DataFrame:
    """Which method leads at each budget of ``budgets`` that both allow, per split and scorer
    both methods train: Δ = ``first`` − ``second`` of expected best validation pass@1 (points)
    with its interval, and the leader (``first``, ``second`` or ``neither`` when the interval
    holds 0)."""
    rows = []
    for split, scorer, values, other in _pairs(scores, first, second):
        for k in budgets:
            if k > min(len(values), len(other)):
                continue
            _, delta, low, high = equal_budget_delta(values, other, k=k)
            verdict = _verdict(low, high)
            rows.append({"split": split, "scorer": scorer, "configurations tried": k,
                         "Δ": delta, "low": low, "high": high,
                         "leads": {"higher": first, "lower": second}.get(verdict, "neither")})
    return pl.DataFrame(rows, schema={
        "split": pl.String, "scorer": pl.String, "configurations tried": pl.Int64,
        "Δ": pl.Float64, "low": pl.Float64, "high": pl.Float64, "leads": pl.String})


def equal_budget_rows(scores: Mapping[tuple[str, str, str, str], Sequence[float]],
                      first: str = "σ-RRHF", second: str = "DPO") -> pl.DataFrame:
    """The findings rows "σ-RRHF vs DPO at equal budget": per split and scorer that both
    methods train, their expected best validation pass@1 at the same number of
    configurations tried, and the Δ with its interval."""
    rows = []
    for split, scorer, values, other in _pairs(scores, first, second):
        k, delta, low, high = equal_budget_delta(values, other)
        rows.append({"finding": f"{first} vs {second} at equal budget", "split": split,
                     "scorer": scorer, "configurations tried": k,
                     f"{first} expected best": expected_best(values, k),
                     f"{second} expected best": expected_best(other, k),
                     "Δ": delta, "low": low, "high": high,
                     "verdict": _verdict(low, high)})
    return pl.DataFrame(rows, schema={
        "finding": pl.String, "split": pl.String, "scorer": pl.String,
        "configurations tried": pl.Int64, f"{first} expected best": pl.Float64,
        f"{second} expected best": pl.Float64, "Δ": pl.Float64, "low": pl.Float64,
        "high": pl.Float64, "verdict": pl.String})
