from math import comb

import pytest

from saturated_dag.metrics import pass_at_k


@pytest.mark.parametrize("c", range(9))
def test_n8_pass1_is_fraction_and_pass8_is_any(c: int) -> None:
    assert pass_at_k(8, c, 1) == pytest.approx(c / 8)
    assert pass_at_k(8, c, 8) == (1.0 if c > 0 else 0.0)


@pytest.mark.parametrize("c", range(11))
def test_n10_k3_closed_form(c: int) -> None:
    expected = 1 - comb(10 - c, 3) / comb(10, 3) if 10 - c >= 3 else 1.0
    assert pass_at_k(10, c, 3) == pytest.approx(expected)


def test_invalid_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(8, 9, 1)
    with pytest.raises(ValueError):
        pass_at_k(8, 1, 9)


def test_summary_is_built_from_per_question_counts() -> None:
    import polars as pl

    from saturated_dag.evaluation import per_question_results, summarise

    rows = [{"question_id": q, "cell": "2x1", "correct": ok}
            for q, flags in {"a": [1] * 8, "b": [1, 0, 0, 0, 0, 0, 0, 0], "c": [0] * 8}.items()
            for ok in flags]
    table = per_question_results(pl.DataFrame(rows))
    assert table["correct"].to_list() == [8, 1, 0] and table["n"].to_list() == [8, 8, 8]
    summary = summarise(table)
    assert summary["pass@1"] == pytest.approx(100 * (1 + 1 / 8 + 0) / 3)
    assert summary["pass@8"] == pytest.approx(100 * 2 / 3)
    with pytest.raises(ValueError, match="at least 9 samples"):
        summarise(table, ks=(9,))


def test_sweep_table_is_built_from_per_question_results() -> None:
    import polars as pl

    from saturated_dag.result_tables import sweep_table, to_markdown

    base = pl.DataFrame({"question_id": ["a", "b"], "n": [8, 8], "correct": [4, 0]})
    better = pl.DataFrame({"question_id": ["b", "a"], "n": [8, 8], "correct": [1, 8]})
    frame = sweep_table(base, "hard", [("λ=0", {"lambda": 0.0}, better),
                                       ("λ=1", {"lambda": 1.0}, base)])
    assert frame["run"].to_list() == ["Base model", "λ=0", "λ=1"]
    row = frame.row(1, named=True)
    assert row["pass@1"] == pytest.approx(100 * (1 + 1 / 8) / 2)
    assert row["pass@8"] == 100.0 and row["Δ pass@8"] == 50.0
    markdown = to_markdown(frame)
    assert "**56.25**" in markdown and "+50.00" in markdown
    other = pl.DataFrame({"question_id": ["a", "c"], "n": [8, 8], "correct": [1, 1]})
    with pytest.raises(ValueError, match="covers different questions"):
        sweep_table(base, "hard", [("x", {}, other)])


def test_paired_bootstrap_delta_matches_a_direct_computation() -> None:
    """Against the definition, written out: resample question indices, average the paired
    differences, take the percentiles."""
    import numpy as np

    from saturated_dag.metrics import paired_bootstrap_delta

    rng = np.random.default_rng(5)
    base = rng.integers(0, 9, 40) / 8
    run = np.clip(base + rng.integers(-2, 4, 40) / 8, 0, 1)
    delta, low, high = paired_bootstrap_delta(run, base, resamples=2000, seed=3)
    picks = np.random.default_rng(3).integers(0, 40, (2000, 40))
    direct = np.array([np.mean([run[i] - base[i] for i in row]) for row in picks])
    assert delta == pytest.approx(np.mean(run - base))
    assert (low, high) == pytest.approx(tuple(np.percentile(direct, [2.5, 97.5])))
    assert low < delta < high


def test_paired_bootstrap_delta_degenerate_and_bad_input() -> None:
    from saturated_dag.metrics import paired_bootstrap_delta

    # the same shift on every question: no sampling noise, a zero-width interval
    assert paired_bootstrap_delta([0.5, 0.75, 1.0], [0.25, 0.5, 0.75]) == pytest.approx(
        (0.25, 0.25, 0.25))
    # pairing matters: unpaired noise cancels when the two lists move together
    _, low, high = paired_bootstrap_delta([0, 1, 0, 1], [0, 1, 0, 1])
    assert low == high == 0
    with pytest.raises(ValueError, match="equal-length"):
        paired_bootstrap_delta([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap_delta([1.0], [1.0], level=1.5)
