"""Intervals for eval results over replicates and questions (``docs/statistics.md``).

A row of a results table is a set of replicates (training seed, eval seed), each with one value
per eval question: its pass@k from that replicate's n samples (``pass_at_k``). The estimate is
the mean over replicates of the mean over questions. Its interval is a percentile bootstrap
over both levels: questions resampled with replacement, and, independently, replicates
resampled with replacement, so the interval covers which questions were asked, which samples
were drawn and which seeds trained the adapter.

Δ to the base model is paired over questions: one question resample is applied to both rows,
so a question that is hard for both cancels out; each row's replicates are resampled on their
own (a row's replicates are not the base model's). With one replicate per row this is exactly
``saturated_dag.metrics.paired_bootstrap_delta``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from saturated_dag.metrics import pass_at_k

LEVEL = 0.95
RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """An estimate with its percentile interval and the sample it was computed on."""

    estimate: float
    low: float
    high: float
    replicates: int
    questions: int
    level: float = LEVEL
    p: float | None = None
    """A paired Δ's two-sided bootstrap p-value for Δ = 0 (``two_sided_p``); None elsewhere."""

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (e.g. 100 for %)."""
        return Interval(self.estimate * factor, self.low * factor, self.high * factor,
                        self.replicates, self.questions, self.level, self.p)


def _matrix(values: Sequence[Sequence[float]] | np.ndarray, what: str) -> np.ndarray:
    """``values`` as a finite (replicates, questions) float array; one row per replicate."""
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"{what}: need a non-empty (replicates, questions) table, got shape "
                         f"{matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what}: values must be finite")
    return matrix


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _percentiles(stats: np.ndarray, level: float) -> tuple[float, float]:
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


def _replicate_means(matrix: np.ndarray, replicate_picks: np.ndarray,
                     question_picks: np.ndarray) -> np.ndarray:
    """Per bootstrap draw b: the mean of ``matrix[replicate_picks[b]][:, question_picks[b]]``.

    First each replicate's mean over the picked questions (one replicate at a time, so memory
    stays draws x questions), then the mean of those over the picked replicates.
    """
    by_replicate = np.stack([row[question_picks].mean(axis=1) for row in matrix], axis=1)
    return np.take_along_axis(by_replicate, replicate_picks, axis=1).mean(axis=1)


def bootstrap_mean(values: Sequence[Sequence[float]] | np.ndarray, resamples: int = RESAMPLES,
                   level: float = LEVEL, seed: int = 0) -> Interval:
    """The mean of a (replicates, questions) table with its two-level bootstrap interval."""
    _check_level(level)
    matrix = _matrix(values, "values")
    replicates, questions = matrix.shape
    rng = np.random.default_rng(seed)
    question_picks = rng.integers(0, questions, (resamples, questions))
    replicate_picks = rng.integers(0, replicates, (resamples, replicates))
    stats = _replicate_means(matrix, replicate_picks, question_picks)
    low, high = _percentiles(stats, level)
    return Interval(float(matrix.mean()), low, high, replicates, questions, level)


def paired_delta_draws(run: Sequence[Sequence[float]] | np.ndarray,
                       base: Sequence[Sequence[float]] | np.ndarray,
                       resamples: int = RESAMPLES, seed: int = 0
                       ) -> tuple[float, np.ndarray, int, int]:
    """The paired Δ's estimate, its ``resamples`` bootstrap draws, and the sample it rests on
    (run replicates, questions): what ``paired_delta`` reads its interval and p-value from, and
    what a claim other than "Δ = 0" (``findings``) reads its own p-value from."""
    a, b = _matrix(run, "run"), _matrix(base, "base")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"run and base must cover the same questions: {a.shape[1]} and "
                         f"{b.shape[1]} columns")
    questions = a.shape[1]
    rng = np.random.default_rng(seed)
    question_picks = rng.integers(0, questions, (resamples, questions))
    run_picks = rng.integers(0, a.shape[0], (resamples, a.shape[0]))
    base_picks = rng.integers(0, b.shape[0], (resamples, b.shape[0]))
    draws = (_replicate_means(a, run_picks, question_picks)
             - _replicate_means(b, base_picks, question_picks))
    return float(a.mean() - b.mean()), draws, a.shape[0], questions


def paired_delta(run: Sequence[Sequence[float]] | np.ndarray,
                 base: Sequence[Sequence[float]] | np.ndarray, resamples: int = RESAMPLES,
                 level: float = LEVEL, seed: int = 0) -> Interval:
    """Δ = mean(run) − mean(base) over the same questions, with its paired bootstrap interval
    and two-sided p-value for Δ = 0.

    ``run`` and ``base`` are (replicates, questions) tables whose columns are the same
    questions in the same order; their replicate counts may differ.
    """
    return delta_interval(*paired_delta_draws(run, base, resamples, seed), level=level)


def delta_interval(estimate: float, draws: np.ndarray, replicates: int, questions: int,
                   level: float = LEVEL) -> Interval:
    """A paired Δ's percentile interval and two-sided p-value, read off its bootstrap draws."""
    _check_level(level)
    low, high = _percentiles(draws, level)
    return Interval(estimate, low, high, replicates, questions, level, two_sided_p(draws))


def share_beyond(draws: np.ndarray, bound: float, side: str) -> float:
    """The bootstrap share of draws at or beyond ``bound`` (``side`` ``"below"``: ≤ bound,
    ``"above"``: ≥ bound), add-one smoothed so no p-value is exactly 0 from finite draws."""
    hits = int(np.count_nonzero(draws <= bound if side == "below" else draws >= bound))
    return (hits + 1) / (draws.size + 1)


def two_sided_p(draws: np.ndarray, null: float = 0.0) -> float:
    """The two-sided bootstrap p-value of Δ = ``null``: twice the smaller share of draws on
    either side of it. It is below 1 − ``level`` about when the percentile interval excludes
    ``null`` (the same draws, read as a test instead of an interval)."""
    return min(1.0, 2 * min(share_beyond(draws, null, "below"),
                            share_beyond(draws, null, "above")))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment: each p-value of a family of m tests made comparable to the
    family-wise level (reject p_(i) while p_(i) ≤ α / (m − i + 1), in increasing order).

    Why Holm (docs/statistics.md): a results table or the findings list is read as a set of
    yes/no claims ("this row beats the base model"), so the error to bound is *any* false
    claim in the family; Holm bounds it at α under any dependence between the rows (they share
    the base model's questions) and never rejects less than Bonferroni. ``None`` entries (a row
    not run) are not tests: they stay None and do not count in m.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))  # monotone in the p order
        adjusted[i] = running
    return adjusted


def per_question_pass_at_k(report: pl.DataFrame, k: int,
                           question_ids: Sequence[str] | None = None) -> np.ndarray:
    """One eval report's pass@k per question (fractions), in ``question_ids`` order.

    ``report`` has one row per question with its sample count ``n`` and correct count
    ``correct``. A question of ``question_ids`` missing from the report is an error: a paired
    comparison needs every question in both rows.
    """
    counts = {qid: (int(n), int(c)) for qid, n, c in
              report.select("question_id", "n", "correct").iter_rows()}
    order = list(question_ids) if question_ids is not None else sorted(counts)
    missing = [q for q in order if q not in counts]
    if missing:
        raise ValueError(f"the report lacks {len(missing)} of the questions, e.g. "
                         f"{missing[:3]}: every row must cover the same eval questions")
    return np.array([pass_at_k(*counts[q], k) for q in order], dtype=float)


def seed_matrix(report: pl.DataFrame, k: int,
                question_ids: Sequence[str] | None = None) -> np.ndarray:
    """A per-question report's pass@k as a (training replicates, questions) table: each
    training seed's row is its per-question pass@k averaged over that seed's eval replicates.

    Eval replicates are more samples of the same adapter, so they are averaged; training
    replicates are different adapters, so they stay rows for the two-level bootstrap
    (``docs/statistics.md``). A report without ``training_replicate`` is one training seed.
    """
    if "training_replicate" not in report.columns:
        return replicate_matrix(report, k, question_ids).mean(axis=0)[None, :]
    rows = []
    for (seed,), part in report.group_by("training_replicate", maintain_order=True):
        try:
            rows.append(replicate_matrix(part, k, question_ids).mean(axis=0))
        except ValueError as err:
            raise ValueError(f"training replicate {seed}: {err}") from None
    return np.stack(rows)


def replicate_matrix(report: pl.DataFrame, k: int,
                     question_ids: Sequence[str] | None = None) -> np.ndarray:
    """A per-question report's pass@k as a (replicates, questions) table, questions in
    ``question_ids`` order; a report without a ``replicate`` column is one replicate.

    Every replicate must cover every question: the tables compare rows question by question.
    """
    if "replicate" not in report.columns:
        return per_question_pass_at_k(report, k, question_ids)[None, :]
    order = list(question_ids) if question_ids is not None else sorted(
        set(report["question_id"].to_list()))
    rows = []
    for (replicate,), part in report.group_by("replicate", maintain_order=True):
        try:
            rows.append(per_question_pass_at_k(part, k, order))
        except ValueError as err:
            raise ValueError(f"replicate {replicate}: {err}") from None
    return np.stack(rows)


def _z(level: float) -> float:
    from statistics import NormalDist

    _check_level(level)
    return NormalDist().inv_cdf(0.5 + level / 2)


def questions_for_half_width(sd: float, half_width: float, level: float = LEVEL) -> int:
    """Eval questions needed for a paired Δ's ``level`` interval to be at most
    ``half_width`` wide on each side, when per-question differences have standard deviation
    ``sd``: the normal approximation ``n = (z * sd / half_width)^2`` that the percentile
    bootstrap approaches (docs/study.md). A true difference of ``half_width`` then has its
    interval exclude 0 about half the time; ``detectable_effect`` adds power."""
    if sd < 0 or half_width <= 0:
        raise ValueError(f"need sd >= 0 and half_width > 0, got {sd} and {half_width}")
    return max(1, int(np.ceil((_z(level) * sd / half_width) ** 2)))


def detectable_effect(sd: float, questions: int, level: float = LEVEL,
                      power: float = 0.8) -> float:
    """The smallest true Δ whose ``level`` interval excludes 0 with probability ``power``,
    over ``questions`` paired questions whose differences have standard deviation ``sd``:
    ``(z_level + z_power) * sd / sqrt(questions)``."""
    if questions < 1:
        raise ValueError(f"need at least one question, got {questions}")
    z_power = _z(2 * power - 1) if power > 0.5 else 0.0
    return float((_z(level) + z_power) * sd / np.sqrt(questions))


def per_question_pass_rate(samples: pl.DataFrame, questions: Sequence[str],
                           what: str = "a sample set") -> np.ndarray:
    """pass@1 per question (the mean of its samples' ``correct``), in ``questions`` order: one
    row of a (replicates, questions) table for ``paired_delta``. A question without samples
    is an error naming ``what`` (a sample set that does not cover the eval set)."""
    table = (samples.group_by("question_id")
             .agg(pl.col("correct").cast(pl.Float64).mean().alias("p")))
    found = dict(zip(table["question_id"], table["p"], strict=True))
    missing = [q for q in questions if q not in found]
    if missing:
        raise ValueError(f"{what} lacks {len(missing)} eval question(s), e.g. {missing[0]}")
    return np.array([found[q] for q in questions])
