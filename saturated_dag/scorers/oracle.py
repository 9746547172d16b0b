"""Known-answer scorers for the embedded chain-sum world: the oracle, its shuffled control and
the reliability dial.

The embedded model writes four solution styles (``tasks.solution_styles.detect_style``) that differ
in accuracy on the base model's own pool (``steps`` is right far more often than ``bare``). That
makes the style a *planted* quality signal whose value is measured, not assumed:

- **oracle**: correctness first, then the style's accuracy measured on the generation pool
  (``style_accuracy``): ``score = 2 * correct + accuracy(style)``, so every correct completion
  outranks every incorrect one and, among equals, the more accurate style ranks higher
  (completions of one style tie).
- **oracle_shuffled**: the oracle's scores permuted within each question (seeded): every
  question keeps its multiset of scores, but which completion gets which is random. The
  negative control: the same score distribution with the signal removed.
- **reliability dial** (``oracle_rho75`` ... ``oracle_rho0``): the oracle mixed with noise so
  that the mean within-question Spearman ρ with the oracle is a chosen number. Per question,
  ``s = w * z + (1 - w) * e``, with ``z`` the oracle standardised within the question (0 when
  constant) and ``e`` standard normal noise seeded by (seed, question); ``w`` is found by
  bisection on the scored completions (``calibrate_weight``), since the oracle's ties make the
  Gaussian copula's closed form miss, and the achieved ρ is reported beside the target.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from saturated_dag.scorers.agreement import question_rho
from saturated_dag.scorers.scored_completions import ScoredCompletions, score_frame
from saturated_dag.tasks.solution_styles import detect_style

DIAL: dict[str, float] = {"oracle": 1.0, "oracle_rho75": 0.75, "oracle_rho50": 0.5,
                          "oracle_rho25": 0.25, "oracle_rho0": 0.0}
"""The reliability dial's scorers and their target agreement ρ with the oracle."""
SHUFFLED = "oracle_shuffled"
ORACLE_SCORERS: tuple[str, ...] = (*DIAL, SHUFFLED)
"""Every known-answer scorer, by the name it has in profiles, tables and files."""


def styled(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``style`` column read off each completion (``detect_style``)."""
    return frame.with_columns(
        style=pl.col("completion").map_elements(detect_style, return_dtype=pl.String))


def style_accuracy(pool: pl.DataFrame) -> dict[str, float]:
    """Each style's share of correct completions over the whole generation pool (all
    questions, correct or not): the planted feature's value, measured on the base model."""
    if pool.is_empty():
        raise ValueError("style_accuracy: the generation pool is empty")
    table = (styled(pool).group_by("style")
             .agg(pl.col("correct").cast(pl.Float64).mean().alias("accuracy")))
    return {str(s): float(a) for s, a in table.iter_rows()}


def oracle_values(completions: Sequence[str], correct: Sequence[bool],
                  accuracy: Mapping[str, float]) -> np.ndarray:
    """``2 * correct + accuracy(style)``: correctness first, then the style measured to be more
    accurate. A style the pool never showed scores 0 (the least trusted)."""
    return np.array([2.0 * bool(c) + float(accuracy.get(detect_style(text), 0.0))
                     for text, c in zip(completions, correct, strict=True)])


def oracle_scores(completions: ScoredCompletions, accuracy: Mapping[str, float]) -> pl.DataFrame:
    """The oracle's score table over the selected completions."""
    rows = completions.rows
    values = oracle_values(rows["completion"].to_list(), rows["correct"].to_list(), accuracy)
    return score_frame(rows, "oracle", values)


def _question_rng(seed: int, question_id: str, salt: str) -> np.random.Generator:
    """A generator of its own per (seed, question): a score does not depend on which other
    questions were scored, or in what order."""
    return np.random.default_rng([seed, zlib.crc32(f"{salt}/{question_id}".encode())])


def _groups(frame: pl.DataFrame) -> list[np.ndarray]:
    """Row indices of each question, in the frame's order of first appearance."""
    ids = frame["question_id"].to_list()
    where: dict[str, list[int]] = {}
    for i, qid in enumerate(ids):
        where.setdefault(qid, []).append(i)
    return [np.asarray(v) for v in where.values()]


def shuffled_scores(oracle: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """The oracle's scores permuted within each question (the negative control): each
    question's multiset of scores is kept exactly, their assignment is random."""
    values = oracle["score"].to_numpy().copy()
    ids = oracle["question_id"].to_list()
    for index in _groups(oracle):
        rng = _question_rng(seed, ids[index[0]], SHUFFLED)
        values[index] = values[index][rng.permutation(len(index))]
    return oracle.with_columns(pl.Series("score", values, dtype=pl.Float64),
                               pl.lit(SHUFFLED, pl.String).alias("scorer"))


def _standardised(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return np.zeros_like(values) if spread == 0 else (values - values.mean()) / spread


def mean_rho(oracle: np.ndarray, other: np.ndarray, groups: Sequence[np.ndarray]) -> float:
    """The mean within-question ρ over the questions where it is defined (the agreement
    table's statistic); NaN when it is defined nowhere."""
    rhos = [r for index in groups
            if (r := question_rho(oracle[index], other[index])[0]) is not None]
    return float(np.mean(rhos)) if rhos else float("nan")


def _mixture(z: np.ndarray, noise: np.ndarray, weight: float) -> np.ndarray:
    return weight * z + (1.0 - weight) * noise


def calibrate_weight(z: np.ndarray, noise: np.ndarray, oracle: np.ndarray,
                     groups: Sequence[np.ndarray], target: float,
                     tolerance: float = 0.005, steps: int = 40) -> tuple[float, float]:
    """The oracle's weight ``w`` in ``w * z + (1 - w) * noise`` whose mean within-question ρ
    with the oracle is ``target``, by bisection on [0, 1] (the mean ρ rises with ``w``, from
    about 0 to 1); returns (w, achieved ρ)."""
    if target >= 1.0:
        return 1.0, 1.0
    low, high = 0.0, 1.0
    achieved = mean_rho(oracle, _mixture(z, noise, 0.0), groups)
    if target <= 0.0 or not np.isfinite(achieved) or achieved >= target:
        return 0.0, achieved
    weight = 0.5
    for _ in range(steps):
        weight = (low + high) / 2
        achieved = mean_rho(oracle, _mixture(z, noise, weight), groups)
        if abs(achieved - target) <= tolerance:
            break
        low, high = (weight, high) if achieved < target else (low, weight)
    return weight, achieved


def dial_scores(oracle: pl.DataFrame, target: float, name: str, seed: int = 0
                ) -> tuple[pl.DataFrame, float, float]:
    """A scorer whose mean within-question Spearman ρ with ``oracle`` is ``target``:
    (its score table, the oracle's weight, the ρ achieved on these completions)."""
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"{name}: the dial's target ρ must be in [0, 1], got {target}")
    values = oracle["score"].to_numpy().astype(float)
    ids = oracle["question_id"].to_list()
    groups = _groups(oracle)
    z = np.zeros_like(values)
    noise = np.zeros_like(values)
    for index in groups:
        z[index] = _standardised(values[index])
        noise[index] = _question_rng(seed, ids[index[0]], "dial").standard_normal(len(index))
    weight, achieved = calibrate_weight(z, noise, values, groups, target)
    mixed = values if weight >= 1.0 else _mixture(z, noise, weight)
    table = oracle.with_columns(pl.Series("score", mixed, dtype=pl.Float64),
                                pl.lit(name, pl.String).alias("scorer"))
    return table, weight, achieved


def known_answer_scores(completions: ScoredCompletions, accuracy: Mapping[str, float],
                        seed: int = 0, names: Sequence[str] = ORACLE_SCORERS
                        ) -> dict[str, tuple[pl.DataFrame, dict[str, float]]]:
    """Every requested known-answer scorer over ``completions``: name -> (score table, facts:
    the target ρ, the oracle's weight and the achieved ρ)."""
    unknown = sorted(set(names) - set(ORACLE_SCORERS))
    if unknown:
        raise ValueError(f"unknown known-answer scorers {unknown}; known: {ORACLE_SCORERS}")
    oracle = oracle_scores(completions, accuracy)
    out: dict[str, tuple[pl.DataFrame, dict[str, float]]] = {}
    for name in names:
        if name == SHUFFLED:
            out[name] = (shuffled_scores(oracle, seed), {})
        else:
            table, weight, achieved = dial_scores(oracle, DIAL[name], name, seed)
            out[name] = (table, {"target_rho": DIAL[name], "oracle_weight": weight,
                                 "achieved_rho": achieved})
    return out


def style_spread(base: pl.DataFrame, min_spread: float) -> pl.DataFrame:
    """Per eval cell, from the base model's own eval samples: its pass@1, each style's
    accuracy, the spread between the most and least accurate style (styles with at least 5%
    of the cell's samples) and whether the cell can show a style effect (spread ≥
    ``min_spread`` points)."""
    styled_samples = styled(base)
    total = styled_samples.group_by("cell").agg(cell_samples=pl.len())
    per_style = (styled_samples.group_by("cell", "style")
                 .agg(samples=pl.len(), accuracy=100 * pl.col("correct").cast(pl.Float64).mean())
                 .join(total, on="cell")
                 .filter(pl.col("samples") >= 0.05 * pl.col("cell_samples")))
    spread = per_style.group_by("cell").agg(
        best_style=pl.col("style").sort_by("accuracy").last(),
        best_accuracy=pl.col("accuracy").max(),
        worst_style=pl.col("style").sort_by("accuracy").first(),
        worst_accuracy=pl.col("accuracy").min())
    base_p = styled_samples.group_by("cell").agg(
        base_pass_at_1=100 * pl.col("correct").cast(pl.Float64).mean())
    return (base_p.join(spread, on="cell").with_columns(
        style_spread=pl.col("best_accuracy") - pl.col("worst_accuracy"),
        headroom=pl.col("best_accuracy") - pl.col("base_pass_at_1"))
        .with_columns(shows_style_effect=pl.col("style_spread") >= min_spread).sort("cell"))
