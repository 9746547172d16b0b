"""pass@k by the unbiased estimator of Chen et al. (2021); Δ's paired bootstrap is
``saturated_dag.evaluation.statistics.paired_delta``."""

from __future__ import annotations

from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n is correct), c correct."""
    if not 0 <= c <= n:
        raise ValueError(f"correct count {c} outside [0, {n}]")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside [1, n={n}]")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)

