"""The two-level bootstrap of ``saturated_dag.evaluation.statistics`` against direct computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from saturated_dag.evaluation.metrics import pass_at_k
from saturated_dag.evaluation.statistics import (
    Interval,
    bootstrap_mean,
    paired_delta,
    per_question_pass_at_k,
)


def _direct_delta(run: np.ndarray, base: np.ndarray, resamples: int, seed: int
                  ) -> tuple[float, float, float]:
    """The same bootstrap written as loops over draws: the definition in docs/statistics.md."""
    rng = np.random.default_rng(seed)
    questions = run.shape[1]
    q_picks = rng.integers(0, questions, (resamples, questions))
    r_picks = rng.integers(0, run.shape[0], (resamples, run.shape[0]))
    b_picks = rng.integers(0, base.shape[0], (resamples, base.shape[0]))
    stats = []
    for draw in range(resamples):
        run_mean = np.mean([run[r][q_picks[draw]].mean() for r in r_picks[draw]])
        base_mean = np.mean([base[r][q_picks[draw]].mean() for r in b_picks[draw]])
        stats.append(run_mean - base_mean)
    low, high = np.percentile(stats, [2.5, 97.5])
    return float(run.mean() - base.mean()), float(low), float(high)


def _equals_reference(reference, run: np.ndarray, base: np.ndarray, resamples: int,
                      seed: int):
    """``paired_delta``'s interval, checked against ``reference``'s loops on the same draws."""
    got = paired_delta(run, base, resamples=resamples, seed=seed)
    assert (got.estimate, got.low, got.high) == pytest.approx(
        reference(run, base, resamples, seed), abs=1e-12)
    return got


def test_paired_delta_equals_the_direct_computation() -> None:
    rng = np.random.default_rng(3)
    run, base = rng.random((3, 40)), rng.random((2, 40))
    got = _equals_reference(_direct_delta, run, base, 500, 7)
    assert (got.replicates, got.questions, got.level) == (3, 40, 0.95)


def test_one_replicate_is_the_question_bootstrap_written_out() -> None:
    """One adapter per row (the demo): resample question indices, average the paired
    differences, take the percentiles; the same random numbers, the same interval."""
    rng = np.random.default_rng(5)
    base = rng.integers(0, 9, 40) / 8
    run = np.clip(base + rng.integers(-2, 4, 40) / 8, 0, 1)
    got = paired_delta(run, base, resamples=2000, seed=3)
    picks = np.random.default_rng(3).integers(0, 40, (2000, 40))
    direct = np.array([np.mean([run[i] - base[i] for i in row]) for row in picks])
    assert got.estimate == pytest.approx(np.mean(run - base))
    assert (got.low, got.high) == pytest.approx(tuple(np.percentile(direct, [2.5, 97.5])),
                                                abs=1e-12)
    assert got.low < got.estimate < got.high


def test_one_replicates_degenerate_and_bad_input() -> None:
    # the same shift on every question: no sampling noise, a zero-width interval
    got = paired_delta([0.5, 0.75, 1.0], [0.25, 0.5, 0.75])
    assert (got.estimate, got.low, got.high) == pytest.approx((0.25, 0.25, 0.25))
    # pairing matters: unpaired noise cancels when the two lists move together
    got = paired_delta([0, 1, 0, 1], [0, 1, 0, 1])
    assert got.low == got.high == 0
    with pytest.raises(ValueError, match="same questions"):
        paired_delta([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="level"):
        paired_delta([1.0], [1.0], level=1.5)


def test_bootstrap_mean_of_one_row_is_its_mean_with_a_question_interval() -> None:
    values = np.array([[0.0, 1.0, 1.0, 0.0, 1.0]])
    got = bootstrap_mean(values, resamples=4000)
    assert got.estimate == pytest.approx(0.6)
    assert 0.0 <= got.low < 0.6 < got.high <= 1.0
    constant = bootstrap_mean(np.full((4, 10), 0.25))
    assert (constant.low, constant.high) == pytest.approx((0.25, 0.25))


def _study(rng: np.random.Generator, delta: float, seed_sd: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic eval results: 60 questions of uniform difficulty, 4 training seeds that move
    the adapter's whole row, 2 base replicates, pass@1 from n=8 samples per question."""
    difficulty = rng.uniform(0.1, 0.85, 60)
    seeds = rng.normal(0, seed_sd, 4)
    run = np.clip(difficulty + delta + seeds[:, None], 0, 1)
    base = difficulty[None, :].repeat(2, axis=0)
    return rng.binomial(8, run) / 8, rng.binomial(8, base) / 8


@pytest.mark.parametrize("seed_sd", [0.0, 0.04])
def test_intervals_cover_the_true_difference_and_still_detect_one(seed_sd: float) -> None:
    """The 95% interval of Δ contains the population's Δ (0.05) in at least 90% of studies
    (resampling both questions and replicates is conservative: docs/statistics.md), and a Δ of
    0.10 is told from 0 in most of them (measured: 100% and 94%; intervals twice as wide would
    fail this)."""
    rng = np.random.default_rng(11)
    studies = 150
    covered = sum(
        (got := paired_delta(*_study(rng, 0.05, seed_sd), resamples=800, seed=s)).low
        <= 0.05 <= got.high for s in range(studies))
    detected = sum(paired_delta(*_study(rng, 0.10, seed_sd), resamples=800, seed=s).low > 0
                   for s in range(studies))
    assert covered / studies >= 0.9
    assert detected / studies >= 0.8


def test_shapes_and_values_are_checked() -> None:
    with pytest.raises(ValueError, match="same questions"):
        paired_delta(np.zeros((1, 3)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean([[0.5, float("nan")]])
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_mean(np.zeros((2, 0)))
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean([[1.0]], level=1.5)


def test_per_question_pass_at_k_reads_a_report_in_the_given_order() -> None:
    report = pl.DataFrame({"question_id": ["b", "a"], "cell": ["x", "x"], "n": [8, 8],
                           "correct": [2, 8]})
    got = per_question_pass_at_k(report, 4, ["a", "b"])
    assert got.tolist() == pytest.approx([1.0, pass_at_k(8, 2, 4)])
    with pytest.raises(ValueError, match="lacks 1 of the questions"):
        per_question_pass_at_k(report, 1, ["a", "b", "c"])


def test_seed_matrix_averages_eval_replicates_and_keeps_training_seeds_as_rows() -> None:
    from saturated_dag.evaluation.reports import per_question_results
    from saturated_dag.evaluation.statistics import seed_matrix
    from tests.scoring_data import eval_report

    ids = ["a", "b", "c"]
    right = {(s, r): {q: (i + s + r) % 9 for i, q in enumerate(ids)}
             for s in range(2) for r in range(3)}
    report = pl.concat([eval_report({q: (8, c) for q, c in right[(s, r)].items()},
                                    replicate=r, training_replicate=s)
                        for s in range(2) for r in range(3)])
    matrix = seed_matrix(per_question_results(report), 1, ids)
    direct = [[sum(right[(s, r)][q] for r in range(3)) / 24 for q in ids] for s in range(2)]
    assert matrix == pytest.approx(np.array(direct))


def test_tables_resample_training_seeds_with_the_two_level_bootstrap() -> None:
    from saturated_dag.evaluation.reports import per_question_results
    from saturated_dag.reporting.result_tables import results_table
    from tests.scoring_data import eval_report

    ids = [f"q{i:02d}" for i in range(20)]
    base = eval_report({q: (8, i % 9) for i, q in enumerate(ids)})
    seeds = {s: {q: min(8, i % 9 + s * (i % 2)) for i, q in enumerate(ids)} for s in range(3)}
    run = pl.concat([eval_report({q: (8, c) for q, c in seeds[s].items()},
                                 training_replicate=s) for s in range(3)])
    table = results_table(per_question_results(base),
                          {("saturated", "sft", None): per_question_results(run)}, k=8)
    row = table.row(1, named=True)
    assert row["training replicates"] == 3 and table.row(0, named=True)[
        "training replicates"] == 1
    run_matrix = np.array([[seeds[s][q] / 8 for q in ids] for s in range(3)])
    base_matrix = np.array([[(i % 9) / 8 for i, _ in enumerate(ids)]])
    direct = paired_delta(run_matrix, base_matrix).scaled(100)
    assert (row["Δ pass@1"], row["Δ pass@1 low"], row["Δ pass@1 high"]) == pytest.approx(
        (direct.estimate, direct.low, direct.high))
    one_seed = paired_delta(run_matrix.mean(axis=0), base_matrix[0]).scaled(100)
    # resampling seeds that differ widens the interval beyond the questions-only one
    assert direct.high - direct.low > one_seed.high - one_seed.low


def test_the_power_formulas_match_the_bootstrap_they_approximate() -> None:
    from saturated_dag.evaluation.statistics import detectable_effect, questions_for_half_width

    assert questions_for_half_width(0.2, 0.03) == 171  # (1.96 * 0.2 / 0.03)^2 = 170.7
    assert detectable_effect(0.2, 400) == pytest.approx((1.959964 + 0.841621) * 0.01, 1e-5)
    rng = np.random.default_rng(1)
    sd, questions = 0.2, questions_for_half_width(0.2, 0.02)
    widths = []
    for seed in range(20):
        base = rng.uniform(0.2, 0.8, questions)
        run = base + rng.normal(0.0, sd, questions)
        found = paired_delta(run, base, resamples=2000, seed=seed)
        widths.append((found.high - found.low) / 2)
    assert np.mean(widths) == pytest.approx(0.02, rel=0.1)
    with pytest.raises(ValueError):
        questions_for_half_width(0.2, 0.0)
    with pytest.raises(ValueError):
        detectable_effect(0.2, 0)
    # read off an interval: the half-width of sd / sqrt(q) at 95%, the same effect
    half = 1.959964 * 0.2 / np.sqrt(400)
    interval = Interval(0.0, -half, half, replicates=1, questions=400)
    assert interval.detectable() == pytest.approx(detectable_effect(0.2, 400), 1e-6)
    assert interval.detectable(power=0.5) == pytest.approx(half, 1e-9)


def _closed_testing_bonferroni(p: list[float], alpha: float) -> set[int]:
    """Holm's rejections by their definition: closed testing with Bonferroni local tests (H_i
    is rejected when every intersection containing it has min p ≤ α / |set|)."""
    import itertools

    m = len(p)
    rejected = set()
    for i in range(m):
        if all(min(p[j] for j in subset) <= alpha / len(subset)
               for size in range(1, m + 1) for subset in itertools.combinations(range(m), size)
               if i in subset):
            rejected.add(i)
    return rejected


@pytest.mark.parametrize("seed", range(20))
def test_holm_rejects_exactly_what_closed_bonferroni_testing_rejects(seed: int) -> None:
    from saturated_dag.evaluation.statistics import holm

    rng = np.random.default_rng(seed)
    p = list(rng.uniform(0, 0.08, size=int(rng.integers(1, 7))))
    adjusted = holm(p)
    for alpha in (0.01, 0.05, 0.1):
        assert {i for i, a in enumerate(adjusted) if a <= alpha} == \
            _closed_testing_bonferroni(p, alpha)
    assert all(a >= raw for a, raw in zip(adjusted, p, strict=True))


def test_holm_leaves_untested_rows_out_of_the_family() -> None:
    from saturated_dag.evaluation.statistics import holm

    assert holm([0.01, None, 0.04]) == [0.02, None, 0.04]
    assert holm([]) == [] and holm([None]) == [None]
    assert holm([0.6, 0.5]) == [1.0, 1.0]


def test_the_p_value_agrees_with_the_interval_it_shares_draws_with() -> None:
    """p < 0.05 exactly when the 95% percentile interval excludes 0, up to the draws that sit
    between the two readings (interpolation and ties at 0)."""
    rng = np.random.default_rng(3)
    agree = 0
    for shift in np.linspace(-0.3, 0.3, 25):
        run = rng.random((1, 40)) + shift
        base = rng.random((1, 40))
        delta = paired_delta(run, base)
        agree += (delta.p < 0.05) == delta.excludes_zero
        assert 0 < delta.p <= 1
    assert agree >= 24


# --- data seeds: the three-level bootstrap (docs/statistics.md) ---------------------------------

def test_two_level_tables_give_the_intervals_they_gave_before_data_seeds() -> None:
    """A (training seeds, questions) table draws the random numbers it always drew: these are
    the old code's values (``git show 4552b6d:saturated_dag/statistics.py``), bit for bit; a
    (1, T, Q) table is its (T, Q) slice."""
    rng = np.random.default_rng(2024)
    run, base = rng.random((3, 25)), rng.random((2, 25))
    delta = paired_delta(run, base, resamples=1000, seed=4)
    assert (delta.estimate, delta.low, delta.high, delta.p) == (
        -0.005261373483457288, -0.12382010448771572, 0.12914123438245767, 0.9690309690309691)
    assert (delta.replicates, delta.data_seeds) == (3, 1)
    mean = bootstrap_mean(run, resamples=1000, seed=4)
    assert (mean.estimate, mean.low, mean.high) == (
        0.4312839708913861, 0.3505701943002712, 0.5183060019968884)
    assert paired_delta(run[None], base[None], resamples=1000, seed=4) == delta
    assert bootstrap_mean(run[None], resamples=1000, seed=4) == mean


def _shifted(shifts: list[float], seeds: int = 3, questions: int = 30, seed: int = 0
             ) -> np.ndarray:
    """(data seeds, training seeds, questions): each data seed moves its adapters' rows by its
    shift; the training seeds of one data seed differ by a little noise."""
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.2, 0.8, questions)
    return np.stack([[difficulty + shift + rng.normal(0, 0.01, questions)
                      for _ in range(seeds)] for shift in shifts])


def test_data_seeds_that_differ_widen_the_interval_beyond_flat_training_seeds() -> None:
    """Data seeds nest their training seeds: resampling the D·T adapters as if independent
    understates the data's draw, so the nested interval is wider than the flat one."""
    runs = _shifted([-0.15, 0.0, 0.15])
    base = runs.mean(axis=(0, 1))[None, :]
    nested = paired_delta(runs, base, resamples=4000)
    flat = paired_delta(runs.reshape(-1, runs.shape[-1]), base, resamples=4000)
    assert nested.estimate == pytest.approx(flat.estimate)
    assert nested.high - nested.low > 1.2 * (flat.high - flat.low)
    assert (nested.data_seeds, nested.replicates, nested.questions) == (3, 3, 30)
    assert (flat.data_seeds, flat.replicates) == (1, 9)
    wide, narrow = bootstrap_mean(runs), bootstrap_mean(runs.reshape(-1, runs.shape[-1]))
    assert wide.high - wide.low > 1.2 * (narrow.high - narrow.low)
    assert wide.scaled(100).data_seeds == 3


def _nested_mean(table: np.ndarray, data: np.ndarray, seeds: np.ndarray,
                 questions: np.ndarray) -> float:
    """One draw's mean, written out: each picked data seed, each of its picked training
    seeds, the mean over the picked questions."""
    values = []
    for j, d in enumerate(data):
        for t in seeds[j]:
            values.append(np.mean([table[d, t, q] for q in questions]))
    return float(np.mean(values))


def _naive_three_level(run: np.ndarray, base: np.ndarray, resamples: int, seed: int
                       ) -> tuple[float, float, float]:
    """The three-level paired bootstrap as loops, in the documented draw order: questions,
    the run's training seeds (T per data seed pick), the base's, then the run's data-seed
    picks, then the base's (a (T, Q) base has none)."""
    rng = np.random.default_rng(seed)
    d_run, t_run, questions = run.shape
    q_picks = rng.integers(0, questions, (resamples, questions))
    run_seed_picks = rng.integers(0, t_run, (resamples, d_run, t_run))
    base_3d = base.ndim == 3
    base_table = base if base_3d else base[None]
    d_base, t_base = base_table.shape[:2]
    base_seed_picks = (rng.integers(0, t_base, (resamples, d_base, t_base)) if base_3d
                       else rng.integers(0, t_base, (resamples, t_base))[:, None, :])
    run_data = rng.integers(0, d_run, (resamples, d_run))
    base_data = (rng.integers(0, d_base, (resamples, d_base)) if base_3d
                 else np.zeros((resamples, 1), dtype=int))
    stats = [_nested_mean(run, run_data[b], run_seed_picks[b], q_picks[b])
             - _nested_mean(base_table, base_data[b], base_seed_picks[b], q_picks[b])
             for b in range(resamples)]
    low, high = np.percentile(stats, [2.5, 97.5])
    return float(run.mean() - base.mean()), float(low), float(high)


@pytest.mark.parametrize("base_shape", [(1, 7), (2, 7), (2, 2, 7)])
def test_the_three_level_bootstrap_equals_its_loops(base_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8)
    run, base = rng.random((3, 2, 7)), rng.random(base_shape)
    got = _equals_reference(_naive_three_level, run, base, 300, 5)
    assert (got.data_seeds, got.replicates, got.questions) == (3, 2, 7)


def test_bootstrap_mean_of_data_seeds_equals_its_loops() -> None:
    rng = np.random.default_rng(9)
    table = rng.random((2, 3, 6))
    got = bootstrap_mean(table, resamples=200, seed=1)
    draws = np.random.default_rng(1)
    q_picks = draws.integers(0, 6, (200, 6))
    seed_picks = draws.integers(0, 3, (200, 2, 3))
    data_picks = draws.integers(0, 2, (200, 2))
    stats = [_nested_mean(table, data_picks[b], seed_picks[b], q_picks[b]) for b in range(200)]
    assert (got.estimate, got.low, got.high) == pytest.approx(
        (table.mean(), *np.percentile(stats, [2.5, 97.5])), abs=1e-12)
    assert (got.data_seeds, got.replicates) == (2, 3)


def _per_question(counts: dict[tuple[int | None, int], list[int]], ids: list[str],
                  with_data_seed: bool = True) -> pl.DataFrame:
    """A per-question report: per (data seed, training replicate), the correct counts of 8
    samples per question in ``ids`` order."""
    rows = [{"question_id": q, "cell": "c", **({"data_seed": d} if with_data_seed else {}),
             "training_replicate": t, "replicate": 0, "n": 8, "correct": c}
            for (d, t), correct in counts.items() for q, c in zip(ids, correct, strict=True)]
    return pl.DataFrame(rows)


def test_seed_matrix_groups_training_seeds_by_data_seed() -> None:
    from saturated_dag.evaluation.statistics import seed_matrix

    ids = ["a", "b"]
    counts = {(0, 0): [8, 0], (0, 1): [4, 0], (1, 2): [2, 2], (1, 3): [0, 8]}
    matrix = seed_matrix(_per_question(counts, ids), 1, ids)
    assert matrix.shape == (2, 2, 2)
    assert matrix.tolist() == [[[1.0, 0.0], [0.5, 0.0]], [[0.25, 0.25], [0.0, 1.0]]]
    # one data seed, a null one (a frame built before the column was filled) and none at all
    # are the (training seeds, questions) table of today
    one = {(0, 0): [8, 0], (0, 1): [4, 0]}
    two_level = seed_matrix(_per_question(one, ids, with_data_seed=False), 1, ids)
    assert two_level.shape == (2, 2)
    assert (seed_matrix(_per_question(one, ids), 1, ids) == two_level).all()
    nulls = {(None, 0): [8, 0], (None, 1): [4, 0]}
    assert (seed_matrix(_per_question(nulls, ids), 1, ids) == two_level).all()


def test_seed_matrix_refuses_data_seeds_with_unequal_training_seeds() -> None:
    from saturated_dag.evaluation.statistics import seed_matrix

    ids = ["a", "b"]
    counts = {(0, 0): [8, 0], (0, 1): [4, 0], (1, 2): [2, 2]}
    with pytest.raises(ValueError, match=r"same number of training seeds.*data seed 0: 2, "
                                         r"data seed 1: 1"):
        seed_matrix(_per_question(counts, ids), 1, ids)
    partial = pl.concat([_per_question({(0, 0): [1, 1]}, ids),
                         _per_question({(1, 1): [1]}, ["a"])])
    with pytest.raises(ValueError, match=r"data seed 1: .*lacks 1 of the questions"):
        seed_matrix(partial, 1, ids)
