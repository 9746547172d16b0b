"""Within-question Spearman agreement: rules for undefined rho, the table, the figure."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from saturated_dag.scorers import agreement
from saturated_dag.scorers.random_scores import random_scores
from saturated_dag.scorers.scored_completions import completions_to_score, score_frame
from tests.scoring_data import make_partitions, make_pool


def _selection():
    pool = make_pool()
    return completions_to_score(pool, make_partitions(pool), ["saturated", "strict_saturated"],
                              ["hard"])


def test_question_rho_rules() -> None:
    assert agreement.question_rho(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == (
        None, agreement.TOO_FEW)
    assert agreement.question_rho(np.ones(4), np.arange(4.0)) == (None, agreement.CONSTANT)
    rho, status = agreement.question_rho(np.arange(4.0), np.arange(4.0) ** 2)
    assert status == agreement.OK and rho == 1.0
    rho, _ = agreement.question_rho(np.array([1.0, 1.0, 2.0, 3.0]), np.array([4.0, 3.0, 2.0, 1.0]))
    assert -1.0 < rho < 0  # ties get average ranks


def test_table_has_every_pair_and_no_nan(tmp_path: Path) -> None:
    sel = _selection()
    rows = sel.rows
    length = score_frame(rows, "length", rows["completion"].str.len_chars())
    constant = score_frame(rows, "constant", np.ones(len(rows)))
    scores = {"length": length, "constant": constant, "random": random_scores(sel, 0),
              "rubric": agreement.rubric_scores(sel)}
    per_q = agreement.per_question_rho(scores)
    splits = ["saturated", "strict_saturated", "hard"]
    summary = agreement.summarize(per_q, list(scores), splits)
    assert summary.height == 3 * 6  # every split x every pair of 4 scorers
    assert summary.columns == agreement.SUMMARY_COLUMNS

    def cell(split: str, a: str, b: str, column: str) -> object:
        return summary.filter((pl.col("split") == split) & (pl.col("scorer_a") == a)
                              & (pl.col("scorer_b") == b))[column].item()

    assert cell("saturated", "constant", "length", "questions") == 0
    assert cell("saturated", "constant", "length", "skipped_constant") == 2
    assert cell("saturated", "constant", "length", "mean_rho") is None
    assert cell("saturated", "length", "random", "questions") == 2
    # hard: only one correct completion is compared -> too few, skipped and counted
    hard = summary.filter(pl.col("split") == "hard")
    assert (hard["questions"] == 0).all() and (hard["skipped_too_few"] == 1).all()
    numeric = summary.select("mean_rho", "median_rho", "pct_positive").drop_nulls()
    assert numeric.height and np.isfinite(numeric.to_numpy()).all()
    md = agreement.summary_markdown(summary, "t")
    assert "nan" not in md.lower() and "n/a" in md and "length vs random" in md
    png = agreement.rho_figure(per_q, tmp_path / "rho.png", "t")
    assert png.stat().st_size > 1000


def test_rubric_scores_rank_clean_over_hedged() -> None:
    scores = agreement.rubric_scores(_selection())
    q = dict(scores.filter(pl.col("question_id") == "q_sat1")
             .select("sample_index", "score").iter_rows())
    assert q[0] > q[2]  # the bare answer beats the hedged one
    assert isinstance(scores, pl.DataFrame) and scores["score"].is_between(0, 1).all()


def _scores(qids: list[str], a: list[float], b: list[float]) -> dict[str, pl.DataFrame]:
    def frame(values: list[float]) -> pl.DataFrame:
        return pl.DataFrame({"question_id": qids, "sample_index": list(range(len(qids))),
                             "split": ["saturated"] * len(qids), "correct": [True] * len(qids),
                             "scorer": ["s"] * len(qids), "score": values})

    return {"b": frame(b), "a": frame(a)}


def test_per_question_rho_rows_dtypes_and_nulls() -> None:
    """Pairs by sorted name, questions sorted; undefined rho is null (not NaN), with the
    reason; only completions both scorers scored count, and only correct ones."""
    qids = ["q2"] * 4 + ["q1"] * 3 + ["q3"] * 2
    scores = _scores(qids, [1, 2, 3, 4, 5, 5, 5, 1, 2], [4, 3, 2, 1, 1, 2, 3, 1, 2])
    per_q = agreement.per_question_rho(scores)
    expected = pl.DataFrame({
        "question_id": ["q1", "q2", "q3"], "split": ["saturated"] * 3,
        "scorer_a": ["a"] * 3, "scorer_b": ["b"] * 3, "n": [3, 4, 2],
        "rho": [None, -1.0, None], "status": [agreement.CONSTANT, agreement.OK,
                                              agreement.TOO_FEW]},
        schema=agreement.PER_QUESTION_SCHEMA)
    assert_frame_equal(per_q, expected)
    scores["a"] = scores["a"].with_columns(correct=pl.col("sample_index") != 0)
    assert agreement.per_question_rho(scores)["n"].to_list() == [3, 3, 2]
    assert agreement.per_question_rho(scores, correct_only=False)["n"].to_list() == [3, 4, 2]
    empty = agreement.per_question_rho({"a": scores["a"].head(0), "b": scores["b"]})
    assert empty.height == 0 and empty.schema == per_q.schema


def test_summary_statistics_and_markdown() -> None:
    per_q = pl.DataFrame({
        "question_id": ["q1", "q2", "q3", "q4", "q5"], "split": ["saturated"] * 5,
        "scorer_a": ["a"] * 5, "scorer_b": ["b"] * 5, "n": [4] * 5,
        "rho": [0.5, -0.25, 1.0, None, None],
        "status": ["ok", "ok", "ok", agreement.TOO_FEW, agreement.CONSTANT]},
        schema=agreement.PER_QUESTION_SCHEMA)
    summary = agreement.summarize(per_q, ["b", "a"], ["saturated", "hard"])
    expected = pl.DataFrame({
        "split": ["saturated", "hard"], "scorer_a": ["a", "a"], "scorer_b": ["b", "b"],
        "questions": [3, 0], "mean_rho": [0.4167, None], "median_rho": [0.5, None],
        "pct_positive": [66.7, None], "skipped_too_few": [1, 0], "skipped_constant": [1, 0]},
        schema=agreement.SUMMARY_SCHEMA)
    assert_frame_equal(summary, expected)
    md = agreement.summary_markdown(summary, "t")
    assert "| saturated | a vs b | 3 | 0.417 | 0.500 | 66.7 | 1 | 1 |" in md
    assert "| hard | a vs b | 0 | n/a | n/a | n/a | 0 | 0 |" in md
    assert agreement.summary_markdown(summary.with_columns(
        mean_rho=pl.lit(float("nan"))), "t").count("n/a") == 4
    assert agreement.summary_markdown(summary, "t") == md


@pytest.mark.parametrize("empty", [True, False])
def test_rho_figure_with_and_without_defined_rho(tmp_path: Path, empty: bool) -> None:
    qids = ["q1"] * 3 + ["q2"] * 3
    per_q = agreement.per_question_rho(_scores(qids, [1, 2, 3, 3, 2, 1], [1, 2, 3, 1, 2, 3]))
    if empty:
        per_q = per_q.head(0)
    png = agreement.rho_figure(per_q, tmp_path / "rho.png", "t")
    assert png.stat().st_size > 1000
