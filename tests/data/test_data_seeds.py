"""Data seeds (``profile.data_seeds``) from the eval report to the captions: each adapter's
report rows say which draw of training data trained it, and every table's intervals resample
data seeds × training seeds × questions and say so (docs/statistics.md)."""

from __future__ import annotations

import polars as pl
import pytest

from saturated_dag.evaluation.reports import evaluate_samples, per_question_results, summarise
from saturated_dag.evaluation.statistics import paired_delta, seed_matrix
from saturated_dag.reporting.result_tables import (
    DATA_DRAW_NOT_COVERED,
    display_rows,
    eval_set_caption,
    results_table,
    sample_text,
)
from saturated_dag.schemas import check_frame, schema

IDS = [f"q{i:02d}" for i in range(12)]


def _report(correct: dict[tuple[int, int], list[int]], data_seeds: bool = True
            ) -> pl.DataFrame:
    """A per-question report: per (data seed, training replicate), correct of 8 per question."""
    return pl.DataFrame([
        {"question_id": q, "cell": "c", **({"data_seed": d} if data_seeds else {}),
         "training_replicate": t, "replicate": 0, "n": 8, "correct": c}
        for (d, t), counts in correct.items() for q, c in zip(IDS, counts, strict=True)])


BASE = _report({(0, 0): [i % 9 for i in range(12)]}, data_seeds=False)
# two data seeds of two training seeds each (training_replicate d * 2 + t); the second data
# seed's adapters are better on every question
STUDY = _report({(d, d * 2 + t): [min(8, i % 9 + 3 * d + t) for i in range(12)]
                 for d in range(2) for t in range(2)})
DEMO = _report({(0, 0): [min(8, i % 9 + 1) for i in range(12)]})


def test_a_table_of_data_seeds_resamples_them_and_its_caption_counts_them() -> None:
    table = results_table(BASE, {("saturated", "sft", None): STUDY}, k=8, eval_set="toy")
    check_frame(table, "results_table")
    assert table.columns == list(schema("results_table", k=8))
    assert table["data seeds"].to_list() == [1, 2]
    assert table["training replicates"].to_list() == [1, 2]  # per data seed
    direct = paired_delta(seed_matrix(STUDY, 1, IDS), seed_matrix(BASE, 1, IDS)).scaled(100)
    row = table.row(1, named=True)
    assert (row["Δ pass@1"], row["Δ pass@1 low"], row["Δ pass@1 high"]) == pytest.approx(
        (direct.estimate, direct.low, direct.high))
    caption = eval_set_caption(table)
    assert ("over the 2 data seeds × 2 training seed(s) of each adapter row (data seeds "
            "resampled first, then each one's training seeds)") in caption
    assert DATA_DRAW_NOT_COVERED not in caption
    assert "2 data seeds × 2 training seeds per data seed of each adapter row" in sample_text(
        table)
    headers, _ = display_rows(table)
    assert "data seeds" not in headers  # the caption says it, not a column


def test_a_demo_table_says_the_datas_draw_is_not_in_its_intervals() -> None:
    table = results_table(BASE, {("saturated", "sft", None): DEMO}, k=8, eval_set="toy")
    assert table["data seeds"].to_list() == [1, 1]
    caption = eval_set_caption(table)
    assert caption.endswith(f". {DATA_DRAW_NOT_COVERED}")
    assert "The data's draw is not in the intervals" in caption and "one data seed" in caption
    assert "data seeds ×" not in caption
    # a table written before data seeds (no column) rests on one data seed per row too
    assert eval_set_caption(table.drop("data seeds")) == caption
    # the base model alone was trained on nothing: no sentence about the data
    assert DATA_DRAW_NOT_COVERED not in eval_set_caption(table.head(1))


def test_findings_name_the_data_seeds_their_intervals_rest_on() -> None:
    from saturated_dag.analysis.findings import Comparison, compare_all
    from saturated_dag.analysis.findings import sample_text as findings_text

    reports = {"base": BASE, "saturated/sft": STUDY}
    found = compare_all(reports, [Comparison("SFT beats the base", "-", "saturated/sft",
                                             "base", "greater")])
    assert found[0].delta is not None and found[0].delta.data_seeds == 2
    assert findings_text(found) == ("95% intervals over the 2 data seeds × 2 training seed(s) "
                                    "of each row and the 12 eval questions.")
    demo = compare_all({"base": BASE, "saturated/sft": DEMO}, [found[0].comparison])
    assert "the data's draw is not in them" in findings_text(demo)


def test_evaluate_samples_labels_each_sample_with_its_data_seed() -> None:
    from tests.tasks.test_answer_check_wiring import BACKEND, PARAMS, QUESTIONS

    default = evaluate_samples(QUESTIONS, BACKEND, PARAMS)
    assert list(default.columns) == list(schema("eval_report"))
    assert default.schema["data_seed"] == pl.Int64 and default["data_seed"].unique().to_list() \
        == [0]
    labelled = evaluate_samples(QUESTIONS, BACKEND, PARAMS, training_replicate=3, data_seed=1)
    assert labelled["data_seed"].unique().to_list() == [1]
    table = per_question_results(pl.concat([default, labelled]))
    assert table.columns[:5] == ["question_id", "cell", "data_seed", "training_replicate",
                                 "replicate"]
    assert summarise(table, ks=(1,))["data_seeds"] == 2
    assert seed_matrix(table, 1).shape == (2, 1, len(QUESTIONS))
    # a report written before data seeds has no column: it is data seed 0, and summarised
    # without a count of them
    old = per_question_results(default.drop("data_seed"))
    assert "data_seeds" not in summarise(old, ks=(1,))
    assert (seed_matrix(old, 1) == seed_matrix(per_question_results(default), 1)).all()


def test_each_data_seed_draws_its_own_questions_around_one_eval_set():
    """The study's two draws (its default ``data_seeds: 2``) share few training questions
    (reasoning-gym's item i under seed s + 1 is item i + 1 under seed s: a base seed + 1 drew
    201 of the same 208), and the one eval set and validation set avoid both draws'."""
    from saturated_dag.data.questions import (
        eval_questions,
        training_questions,
        validation_questions,
    )
    from saturated_dag.profiles import load_profile

    profile = load_profile("study")
    assert profile.data_seeds == 2
    draws = [{q.problem for q in training_questions(profile.for_data_seed(d), "chain_sum")}
             for d in range(2)]
    assert len(draws[0]) == len(draws[1]) and len(draws[0] & draws[1]) < len(draws[0]) / 4
    for draw in (profile, profile.for_data_seed(1)):
        held_out = {q.problem for q in eval_questions(draw, "chain_sum")}
        held_out |= {q.problem for q in validation_questions(draw, "chain_sum")}
        assert not held_out & (draws[0] | draws[1])
    assert ([q.problem for q in eval_questions(profile, "chain_sum")]
            == [q.problem for q in eval_questions(profile.for_data_seed(1), "chain_sum")])
