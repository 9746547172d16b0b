"""Within-question Spearman agreement: rules for undefined rho, the table, the figure."""

from pathlib import Path

import numpy as np
import pandas as pd

from saturated_dag.scorers import agreement
from saturated_dag.scorers.random_scores import random_scores
from saturated_dag.scorers.selection import score_frame, select_completions
from tests.scoring_data import make_partitions, make_pool


def _selection():
    pool = make_pool()
    return select_completions(pool, make_partitions(pool), ["saturated", "strict_saturated"],
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
    length = score_frame(rows, "length", rows["completion"].str.len())
    constant = score_frame(rows, "constant", np.ones(len(rows)))
    scores = {"length": length, "constant": constant, "random": random_scores(sel, 0),
              "rubric": agreement.rubric_scores(sel)}
    per_q = agreement.per_question_rho(scores)
    splits = ["saturated", "strict_saturated", "hard"]
    summary = agreement.summarize(per_q, list(scores), splits)
    assert len(summary) == 3 * 6  # every split x every pair of 4 scorers
    sat = summary[summary["split"] == "saturated"].set_index(["scorer_a", "scorer_b"])
    assert sat.loc[("constant", "length"), "questions"] == 0
    assert sat.loc[("constant", "length"), "skipped_constant"] == 2
    assert sat.loc[("length", "random"), "questions"] == 2
    # hard: only one correct completion is compared -> too few, skipped and counted
    hard = summary[summary["split"] == "hard"]
    assert (hard["questions"] == 0).all() and (hard["skipped_too_few"] == 1).all()
    numeric = summary[["mean_rho", "median_rho", "pct_positive"]].dropna()
    assert np.isfinite(numeric.to_numpy(float)).all()
    md = agreement.summary_markdown(summary, "t")
    assert "nan" not in md.lower() and "n/a" in md and "length vs random" in md
    png = agreement.rho_figure(per_q, tmp_path / "rho.png", "t")
    assert png.stat().st_size > 1000


def test_rubric_scores_rank_clean_over_hedged() -> None:
    scores = agreement.rubric_scores(_selection())
    q = scores[scores["question_id"] == "q_sat1"].set_index("sample_index")["score"]
    assert q[0] > q[2]  # the bare answer beats the hedged one
    assert isinstance(scores, pd.DataFrame) and scores["score"].between(0, 1).all()
