"""pass@k by the unbiased estimator of Chen et al. (2021), and a paired bootstrap for Δ."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n is correct), c correct."""
    if not 0 <= c <= n:
        raise ValueError(f"correct count {c} outside [0, {n}]")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside [1, n={n}]")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def paired_bootstrap_delta(
    run: Sequence[float], base: Sequence[float], resamples: int = 10_000,
    level: float = 0.95, seed: int = 0,
) -> tuple[float, float, float]:
    """Δ = mean(run − base) over the same questions, with a percentile bootstrap interval.

    ``run[i]`` and ``base[i]`` are one question's metric (e.g. pass@1) under two models; the
    questions are resampled with replacement, pairs kept together, so the interval covers
    the eval set's sampling noise (which questions, which samples), not the training seed's.
    Returns ``(delta, low, high)``.
    """
    a, b = np.asarray(run, dtype=float), np.asarray(base, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"need two equal-length, non-empty per-question lists, got "
                         f"{a.shape} and {b.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    diff = a - b
    picks = np.random.default_rng(seed).integers(0, len(diff), (resamples, len(diff)))
    means = diff[picks].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(diff.mean()), float(low), float(high)
