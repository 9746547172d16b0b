from math import comb

import pytest

from saturated_dag.evaluation.metrics import pass_at_k


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

    from saturated_dag.evaluation.reports import per_question_results, summarise

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

    from saturated_dag.reporting.result_tables import sweep_table, to_markdown

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
