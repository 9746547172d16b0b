"""The study's findings: verdicts read off paired intervals
(``saturated_dag.analysis.findings``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from saturated_dag.analysis.findings import (
    FAILS,
    HOLDS,
    OPEN,
    Comparison,
    agreement,
    compare,
    paper_comparisons,
    verdict,
)
from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.evaluation.statistics import Interval, paired_delta
from tests.scoring_data import eval_report


def _interval(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, low, high, 1, 10)


@pytest.mark.parametrize(("low", "high", "claim", "expected"), [
    (0.5, 4.0, "greater", HOLDS), (-4.0, -0.5, "greater", FAILS), (-1.0, 2.0, "greater", OPEN),
    (-4.0, -0.5, "less", HOLDS), (0.5, 4.0, "less", FAILS), (-1.0, 2.0, "less", OPEN),
    (-2.0, 2.5, "negligible", HOLDS), (3.5, 8.0, "negligible", FAILS),
    (-9.0, -3.0, "negligible", FAILS), (-1.0, 5.0, "negligible", OPEN),
])
def test_the_verdict_is_read_off_the_interval(low: float, high: float, claim: str,
                                              expected: str) -> None:
    assert verdict(_interval(low, high), claim) == expected  # type: ignore[arg-type]


def test_a_comparison_is_the_paired_delta_of_its_two_rows() -> None:
    ids = [f"q{i:02d}" for i in range(30)]
    reference = {q: i % 5 for i, q in enumerate(ids)}
    row = {q: min(8, c + 2) for q, c in reference.items()}
    reports = {"base": per_question_results(eval_report({q: (8, c) for q, c in
                                                         reference.items()})),
               "hard/x": per_question_results(eval_report({q: (8, c) for q, c in row.items()}))}
    result = compare(reports, Comparison("x beats base", "Table 1", "hard/x", "base",
                                         "greater"))
    direct = paired_delta([row[q] / 8 for q in ids], [reference[q] / 8 for q in ids]
                          ).scaled(100)
    assert result.delta is not None
    assert (result.delta.low, result.delta.high) == pytest.approx((direct.low, direct.high))
    assert result.verdict == HOLDS
    missing = compare(reports, Comparison("y", "Table 1", "hard/y", "base", "greater"))
    assert missing.delta is None and missing.verdict == "not run"


def test_every_paper_comparison_names_rows_the_matrix_can_produce() -> None:
    from saturated_dag.experiments import experiment_matrix
    from saturated_dag.profiles import load_profile

    cells = {f"{c.split}/{c.name}" for c in experiment_matrix(load_profile("study").training)}
    for comparison in paper_comparisons():
        assert {comparison.row, comparison.reference} - {"base"} <= cells, comparison


def test_agreement_means_defined_rho_per_pair_with_an_interval() -> None:
    rows = pl.DataFrame({
        "question_id": ["a", "b", "c", "a"], "split": ["strict_saturated"] * 4,
        "scorer_a": ["self_judge", "strong_judge", "self_judge", "entropy"],
        "scorer_b": ["strong_judge", "self_judge", "strong_judge", "strong_judge"],
        "n": [8] * 4, "rho": [0.5, 0.1, float("nan"), -0.2], "status": ["ok"] * 4})
    found = {r.pair: r for r in agreement(rows)}
    pair = found[("self_judge", "strong_judge")]
    assert pair.questions == 2 and pair.mean is not None
    assert pair.mean.estimate == pytest.approx(np.mean([0.5, 0.1]))
    assert found[("entropy", "self_judge")].mean is None


def test_findings_carry_their_claims_p_and_holms_correction_over_the_family() -> None:
    from saturated_dag.analysis.findings import compare_all

    ids = [f"q{i:02d}" for i in range(40)]
    reference = {q: i % 5 for i, q in enumerate(ids)}
    clear = {q: min(8, c + 3) for q, c in reference.items()}  # a large gain
    slight = {q: min(8, c + (1 if i % 9 == 0 else 0)) for i, (q, c) in
              enumerate(reference.items())}  # a small one: holds alone, not in a family

    def report(counts: dict[str, int]) -> pl.DataFrame:
        return per_question_results(eval_report({q: (8, c) for q, c in counts.items()}))

    reports = {"base": report(reference), "hard/a": report(clear), "hard/b": report(slight)}
    comparisons = [Comparison("a", "T", "hard/a", "base", "greater"),
                   Comparison("b", "T", "hard/b", "base", "greater"),
                   *(Comparison(f"n{i}", "T", "hard/b", "base", "negligible")
                     for i in range(8)),
                   Comparison("missing", "T", "hard/zz", "base", "greater")]
    results = compare_all(reports, comparisons)
    a, b, missing = results[0], results[1], results[-1]
    assert a.verdict == HOLDS and a.holds_after_holm and a.p is not None and a.p < 0.01
    assert missing.p is None and missing.holm_p is None and not missing.holds_after_holm
    tested = [r for r in results if r.p is not None]
    assert all(r.holm_p >= r.p for r in tested)
    assert len(tested) == 10  # the row not run is not in the family
    # the claim's p reads the same draws as its verdict: "holds" alone is p < 0.05
    for r in tested:
        assert (r.p < 0.05) == (r.verdict == HOLDS) or abs(r.p - 0.05) < 0.01
    # the small gain holds on its own (p ≈ 0.01) but not among ten claims
    assert b.verdict == HOLDS and b.p < 0.05 and not b.holds_after_holm


def _rhos() -> pl.DataFrame:
    values = [0.9, 0.7, 0.8, 0.6, 0.95, 0.75, 0.85, 0.65]  # clearly above 0
    rows = [{"question_id": f"q{i}", "split": "strict_saturated", "scorer_a": "self_judge",
             "scorer_b": "strong_judge", "n": 8, "rho": v, "status": "ok"}
            for i, v in enumerate(values)]
    rows += [{"question_id": f"q{i}", "split": "strict_saturated", "scorer_a": "entropy",
              "scorer_b": "strong_judge", "n": 8, "rho": v, "status": "ok"}
             for i, v in enumerate([0.4, -0.5, 0.3, -0.2, float("nan")])]
    rows.append({"question_id": "q9", "split": "saturated", "scorer_a": "entropy",
                 "scorer_b": "self_judge", "n": 8, "rho": None, "status": "constant"})
    return pl.DataFrame(rows)


def test_agreement_rows_give_each_pairs_mean_rho_its_interval_and_unrounded_share() -> None:
    from saturated_dag.analysis.findings import agreement_rows
    from saturated_dag.scorers.agreement import summarize

    per_question = _rhos()
    summary = summarize(per_question, ["entropy", "self_judge", "strong_judge"],
                        ["strict_saturated", "saturated"])
    rows = agreement_rows(per_question, summary)
    assert rows.select("split", "scorers").rows() == [
        (s, f"{a} vs {b}") for s, a, b in summary.select("split", "scorer_a", "scorer_b").rows()]
    by = {(r["split"], r["scorers"]): r for r in rows.iter_rows(named=True)}
    judges = by[("strict_saturated", "self_judge vs strong_judge")]
    assert judges["questions"] == 8 and judges["mean ρ"] == pytest.approx(0.775)
    assert 0 < judges["mean ρ low"] < judges["mean ρ"] < judges["mean ρ high"]
    mixed = by[("strict_saturated", "entropy vs strong_judge")]
    assert mixed["questions"] == 4 and mixed["% ρ > 0"] == 50.0  # the NaN question left out
    assert mixed["median ρ"] == pytest.approx(0.05)
    empty = by[("saturated", "entropy vs self_judge")]
    assert empty["questions"] == 0 and empty["mean ρ"] is None and empty["% ρ > 0"] is None


def test_agreement_summary_sets_each_paper_pair_beside_the_paper_with_its_interval() -> None:
    from saturated_dag.analysis.findings import agreement_summary

    text = agreement_summary(_rhos())
    assert text.startswith("**Mean within-question Spearman ρ on strict_saturated, 95% "
                           "bootstrap interval over questions:** self_judge vs strong_judge "
                           "0.78 [")
    assert "(paper 0.15; 8 questions)" in text and "(paper 0.44; 4 questions)" in text
    assert "entropy vs self_judge n/a (no question with a defined ρ)" in text
    assert "Above 0 beyond chance: self_judge vs strong_judge." in text
    only_saturated = agreement_summary(_rhos().filter(pl.col("split") == "saturated"))
    assert "on saturated" in only_saturated and "Above 0 beyond chance: none." in only_saturated


def test_the_transfer_view_compares_each_operand_size_on_its_own_eval_cells() -> None:
    """Issue 63: per finding, the Δ on the eval cells like the saturated training questions
    (one digit) and on the harder ones (two digits), each the paired Δ of those questions
    alone; an eval set without chain-sum cells gives none."""
    from saturated_dag.analysis.findings import by_digits, cell_digits, transfer_text

    one = {f"a{i}": (8, 4) for i in range(20)}
    two = {f"b{i}": (8, 2) for i in range(20)}
    base = pl.concat([eval_report(one, cell="3x1"), eval_report(two, cell="5x2")])
    row = pl.concat([eval_report({q: (8, 8) for q in one}, cell="3x1"),
                     eval_report(two, cell="5x2")])
    reports = {"base": per_question_results(base), "saturated/x": per_question_results(row)}
    comparison = Comparison("x beats base", "Table 1", "saturated/x", "base", "greater")
    found = by_digits(reports, comparison)
    assert [size for size, _ in found] == [1, 2]
    (_, easy), (_, hard) = found
    assert easy.delta is not None and easy.delta.estimate == pytest.approx(50.0)
    assert hard.delta is not None and hard.delta.estimate == pytest.approx(0.0)
    assert easy.delta.questions == 20 and hard.delta.questions == 20
    overall = compare(reports, comparison)
    assert overall.delta is not None and overall.delta.estimate == pytest.approx(25.0)
    text = transfer_text(found)
    assert text.startswith("1 digit: +50.00 [") and "; 2 digits: +0.00 [" in text
    assert (cell_digits("10x2"), cell_digits("gsm8k"), cell_digits("c")) == (2, None, None)
    plain = {name: frame.with_columns(cell=pl.lit("c")) for name, frame in reports.items()}
    assert by_digits(plain, comparison) == []
    assert by_digits(reports, Comparison("y", "T", "saturated/y", "base", "greater")) == []


def test_an_unreadable_null_says_what_its_failed_control_measured() -> None:
    """Issue 63: an unreadable finding names the method whose control failed and why: the
    control's Δ with its interval and the bar it missed."""
    from saturated_dag.analysis.findings import Result, null_reading
    from saturated_dag.analysis.testbed import controls

    verdicts = {"positive control (σ-RRHF)": {
        "Δ": 2.66, "low": -0.1, "high": 5.29, "passed": False,
        "rule": "σ-RRHF with the oracle: Δ ≥ 8 points and the 95% interval above 0"}}
    found = controls(verdicts)
    assert found["rrhf"].measured == ("Δ +2.66 [-0.10, +5.29]; needs Δ ≥ 8 points and the 95% "
                                      "interval above 0")
    result = Result(Comparison("x", "Table 1", "saturated/rrhf_entropy", "base", "greater"),
                    _interval(-1.0, 2.0), OPEN)
    assert null_reading(result, found) == (
        "unreadable: σ-RRHF positive control (oracle) did not pass (Δ +2.66 [-0.10, +5.29]; "
        "needs Δ ≥ 8 points and the 95% interval above 0)")
