"""Intervals for eval results over data seeds, training seeds and questions
(``docs/statistics.md``).

A row of a results table is a set of adapters, each with one value per eval question (its
pass@k, ``pass_at_k``, averaged over its eval replicates): D data seeds (which training data
were drawn) × T training seeds (LoRA initialisation, data order) each, a (D, T, Q) table, or
(T, Q) when the row has one data seed (the base model, the demo). The estimate is the plain
mean; its interval is a percentile bootstrap over every level: per draw, data seeds resampled
with replacement, then within each picked data seed its training seeds, and, independently,
the questions.

Data seeds come first because they nest the training seeds: a data seed's adapters share its
training data, so resampling the flat D·T adapters would miss the data's draw.

Δ to the base model is paired over questions: one question resample is applied to both rows,
so a question that is hard for both cancels out; each row's seeds are resampled on their own
(a row's adapters are not the base model's). With one adapter per row this is the
question-level paired bootstrap (``tests/evaluation/test_statistics.py`` writes it out). A
(T, Q) table draws the same random numbers as a bootstrap without data seeds, so its intervals
reproduce bit for bit; a (D, T, Q) table draws its data-seed picks after those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl

from saturated_dag.evaluation.metrics import pass_at_k

LEVEL = 0.95
RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """An estimate with its percentile interval and the sample it was computed on: ``replicates``
    training seeds in each of ``data_seeds`` data seeds (so ``data_seeds * replicates``
    adapters), on ``questions`` eval questions. For a paired Δ, the run row's counts."""

    estimate: float
    low: float
    high: float
    replicates: int
    """Training seeds per data seed (the row's training replicates when it has one data seed)."""
    questions: int
    level: float = LEVEL
    p: float | None = None
    """A paired Δ's two-sided bootstrap p-value for Δ = 0 (``two_sided_p``); None elsewhere."""
    data_seeds: int = 1
    """Data seeds, resampled before their training seeds; 1: the data's draw is not covered."""

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def detectable(self, power: float = 0.8) -> float:
        """The smallest true Δ that an interval this wide would exclude 0 for with probability
        ``power``: its half-width x (z_level + z_power) / z_level (``detectable_effect``, read
        off the interval instead of a standard deviation)."""
        return (self.high - self.low) / 2 * (_z(self.level) + _z_power(power)) / _z(self.level)

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (e.g. 100 for %)."""
        return Interval(self.estimate * factor, self.low * factor, self.high * factor,
                        self.replicates, self.questions, self.level, self.p, self.data_seeds)


Table = Sequence[Sequence[float]] | Sequence[Sequence[Sequence[float]]] | np.ndarray
"""A row's values: (questions,), (training seeds, questions) or (data seeds, training seeds,
questions)."""


def _matrix(values: Table, what: str) -> np.ndarray:
    """``values`` as a finite float array, (training seeds, questions) or (data seeds, training
    seeds, questions); a row of one data seed is its (training seeds, questions) table, so it
    draws the random numbers, and gets the interval, that a two-level table gets."""
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim == 3 and matrix.shape[0] == 1:
        matrix = matrix[0]
    if matrix.ndim not in (2, 3) or 0 in matrix.shape:
        raise ValueError(f"{what}: need a non-empty (replicates, questions) or (data seeds, "
                         f"training seeds, questions) table, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what}: values must be finite")
    return matrix


def _counts(matrix: np.ndarray) -> tuple[int, int]:
    """(data seeds, training seeds per data seed) of a ``_matrix`` table."""
    return (matrix.shape[0], matrix.shape[1]) if matrix.ndim == 3 else (1, matrix.shape[0])


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


def _seed_picks(rng: np.random.Generator, matrix: np.ndarray, resamples: int) -> np.ndarray:
    """Per draw, training seeds drawn with replacement: (resamples, T) for a (T, Q) table,
    exactly the draw the two-level bootstrap made; (resamples, D, T) for a (D, T, Q) one, T
    for each of the D data seeds the draw will pick (``_row_picks``)."""
    return rng.integers(0, matrix.shape[-2], (resamples, *matrix.shape[:-1]))


def _row_picks(rng: np.random.Generator, matrix: np.ndarray, seed_picks: np.ndarray
               ) -> np.ndarray:
    """Per draw, the picked rows of ``matrix`` flattened to (D·T, Q): a (T, Q) table's are its
    ``seed_picks`` (no more random numbers drawn); a (D, T, Q) table's draw D data seeds with
    replacement and, at each pick j, the training seeds ``seed_picks[:, j]`` of that data
    seed (two picks of one data seed resample its training seeds twice, independently)."""
    if matrix.ndim == 2:
        return seed_picks
    data_seeds, seeds = matrix.shape[:2]
    data_picks = rng.integers(0, data_seeds, seed_picks.shape[:2])
    return (data_picks[:, :, None] * seeds + seed_picks).reshape(len(seed_picks), -1)


def _flat(matrix: np.ndarray) -> np.ndarray:
    """A table's adapters as rows, (D·T, Q), data seed major (``_row_picks``' indices)."""
    return matrix.reshape(-1, matrix.shape[-1])


def bootstrap_mean(values: Table, resamples: int = RESAMPLES, level: float = LEVEL,
                   seed: int = 0) -> Interval:
    """The mean of a (training seeds, questions) or (data seeds, training seeds, questions)
    table with its bootstrap interval over every level."""
    _check_level(level)
    matrix = _matrix(values, "values")
    questions = matrix.shape[-1]
    rng = np.random.default_rng(seed)
    question_picks = rng.integers(0, questions, (resamples, questions))
    seed_picks = _seed_picks(rng, matrix, resamples)
    rows = _row_picks(rng, matrix, seed_picks)
    stats = _replicate_means(_flat(matrix), rows, question_picks)
    low, high = _percentiles(stats, level)
    data_seeds, replicates = _counts(matrix)
    return Interval(float(matrix.mean()), low, high, replicates, questions, level,
                    data_seeds=data_seeds)


class DeltaDraws(NamedTuple):
    """A paired Δ's estimate, its bootstrap draws and the run row's sample."""

    estimate: float
    draws: np.ndarray
    replicates: int
    """The run's training seeds per data seed."""
    questions: int
    data_seeds: int = 1


def paired_delta_draws(run: Table, base: Table, resamples: int = RESAMPLES, seed: int = 0
                       ) -> DeltaDraws:
    """The paired Δ's estimate, its ``resamples`` bootstrap draws, and the sample it rests on
    (the run's training seeds per data seed, questions, data seeds): what ``paired_delta``
    reads its interval and p-value from, and what a claim other than "Δ = 0" (``findings``)
    reads its own p-value from.

    Random numbers in the order the two-level bootstrap drew them (questions, the run's
    training seeds, the base's), then the data-seed picks of a (D, T, Q) run, then of a
    (D, T, Q) base: a pair of (T, Q) tables gets the draws it always got."""
    a, b = _matrix(run, "run"), _matrix(base, "base")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"run and base must cover the same questions: {a.shape[-1]} and "
                         f"{b.shape[-1]} columns")
    questions = a.shape[-1]
    rng = np.random.default_rng(seed)
    question_picks = rng.integers(0, questions, (resamples, questions))
    run_seeds = _seed_picks(rng, a, resamples)
    base_seeds = _seed_picks(rng, b, resamples)
    run_rows, base_rows = _row_picks(rng, a, run_seeds), _row_picks(rng, b, base_seeds)
    draws = (_replicate_means(_flat(a), run_rows, question_picks)
             - _replicate_means(_flat(b), base_rows, question_picks))
    data_seeds, replicates = _counts(a)
    return DeltaDraws(float(a.mean() - b.mean()), draws, replicates, questions, data_seeds)


def paired_delta(run: Table, base: Table, resamples: int = RESAMPLES, level: float = LEVEL,
                 seed: int = 0) -> Interval:
    """Δ = mean(run) − mean(base) over the same questions, with its paired bootstrap interval
    and two-sided p-value for Δ = 0.

    ``run`` and ``base`` are (training seeds, questions) or (data seeds, training seeds,
    questions) tables whose last axis is the same questions in the same order; their shapes
    may differ otherwise (a (D, T, Q) adapter row against the base model's (1, Q)).
    """
    found = paired_delta_draws(run, base, resamples, seed)
    return delta_interval(found.estimate, found.draws, found.replicates, found.questions,
                          level, data_seeds=found.data_seeds)


def delta_interval(estimate: float, draws: np.ndarray, replicates: int, questions: int,
                   level: float = LEVEL, *, data_seeds: int = 1) -> Interval:
    """A paired Δ's percentile interval and two-sided p-value, read off its bootstrap draws."""
    _check_level(level)
    low, high = _percentiles(draws, level)
    return Interval(estimate, low, high, replicates, questions, level, two_sided_p(draws),
                    data_seeds)


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
    """A per-question report's pass@k as a (training replicates, questions) table, or, when
    its ``data_seed`` column holds more than one data seed, a (data seeds, training seeds,
    questions) one (data seeds in increasing order): each adapter's row is its per-question
    pass@k averaged over its eval replicates.

    Eval replicates are more samples of the same adapter, so they are averaged; training
    replicates are different adapters, so they stay rows, grouped by the data seed that
    trained them, for the bootstrap (``docs/statistics.md``). A report without
    ``training_replicate`` is one training seed; one without ``data_seed`` (written before data
    seeds existed), or with null there, is data seed 0. Every data seed must have the same
    number of training seeds: the nested resample draws T of each, and a data seed with fewer
    would weigh its seeds more than the rest.
    """
    if "data_seed" not in report.columns:
        return _training_matrix(report, k, question_ids)
    report = report.with_columns(pl.col("data_seed").fill_null(0))
    data_seeds = sorted(report["data_seed"].unique().to_list())
    if len(data_seeds) == 1:
        return _training_matrix(report, k, question_ids)
    order = list(question_ids) if question_ids is not None else sorted(
        set(report["question_id"].to_list()))
    tables = {}
    for data_seed in data_seeds:
        part = report.filter(pl.col("data_seed") == data_seed)
        try:
            tables[data_seed] = _training_matrix(part, k, order)
        except ValueError as err:
            raise ValueError(f"data seed {data_seed}: {err}") from None
    counts = {d: t.shape[0] for d, t in tables.items()}
    if len(set(counts.values())) > 1:
        found = ", ".join(f"data seed {d}: {n}" for d, n in counts.items())
        raise ValueError(f"every data seed needs the same number of training seeds for the "
                         f"nested bootstrap; the report has {found}")
    return np.stack(list(tables.values()))


def _training_matrix(report: pl.DataFrame, k: int,
                     question_ids: Sequence[str] | None = None) -> np.ndarray:
    """One data seed's report as (training replicates, questions), each training seed's row
    averaged over its eval replicates (``seed_matrix``)."""
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
    return float((_z(level) + _z_power(power)) * sd / np.sqrt(questions))


def _z_power(power: float) -> float:
    """The one-sided normal quantile of ``power`` (0.84 for 80%; 0 at or below 50%)."""
    return _z(2 * power - 1) if power > 0.5 else 0.0


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
