"""Eval replicates (``evaluation.replicates``): each a fresh sampling seed, cached on its own;
replicate 0 is the single evaluation; tables report the mean over replicates and resample
them in their intervals (docs/statistics.md)."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.pipeline import asset_path, by_name, checks_of, graph, resources

SMALL = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                       "strict_grid": None, "eval_questions_per_cell": 6},
         "sampling": {"n": 4, "max_new_tokens": 6, "temperature": 1.0}}


def _evaluate(out: Path, tiny: Path, replicates: int) -> tuple[pl.DataFrame, dict]:
    overrides = {**SMALL, "policy": {"model": str(tiny), "batch_size": 8},
                 "evaluation": {"replicates": replicates}}
    assets, checks = graph("demo", overrides)
    base = by_name(assets, "chain_sum", "base")
    result = dg.materialize([*assets, *checks_of(checks, "chain_sum", "base")],
                            selection=[a.key for a in base],
                            resources=resources(out, "demo", overrides))
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.metadata
    (event,) = result.get_asset_materialization_events()
    report = pl.read_parquet(asset_path(out, "chain_sum", "eval", "base"))
    return report, event.materialization.metadata


def test_replicates_add_seeds_and_keep_replicate_zero(tmp_path: Path, tiny_model_dir: Path
                                                      ) -> None:
    one, _ = _evaluate(tmp_path / "out", tiny_model_dir, 1)
    two, metadata = _evaluate(tmp_path / "out", tiny_model_dir, 2)
    assert one["replicate"].unique().to_list() == [0]
    assert sorted(two["replicate"].unique().to_list()) == [0, 1]
    assert two.height == 2 * one.height
    # replicate 0 is the single evaluation, sample for sample (same seed, same samples)
    assert_frame_equal(two.filter(pl.col("replicate") == 0), one)
    other = two.filter(pl.col("replicate") == 1)
    assert other["completion"].to_list() != one["completion"].to_list()  # a fresh seed
    assert metadata["eval_replicates"].value == 2
    assert metadata["questions"].value == one["question_id"].n_unique()


def test_results_table_averages_eval_replicates_per_question() -> None:
    """More samples of the same questions: each question's value is its mean over the eval
    replicates, and the interval resamples questions (docs/statistics.md)."""
    from saturated_dag.evaluation.reports import per_question_results
    from saturated_dag.evaluation.statistics import paired_delta
    from saturated_dag.reporting.result_tables import results_table
    from tests.scoring_data import eval_report

    ids = [f"q{i:02d}" for i in range(12)]  # sorted as the tables order questions
    base_right = {q: i % 7 for i, q in enumerate(ids)}
    run_right = {r: {q: min(8, base_right[q] + r * (i % 3)) for i, q in enumerate(ids)}
                 for r in range(2)}  # replicate 1 gains 0, 1 or 2 samples per question
    base = pl.concat([eval_report({q: (8, c) for q, c in base_right.items()}, replicate=r)
                      for r in range(3)])
    run = pl.concat([eval_report({q: (8, c) for q, c in run_right[r].items()}, replicate=r)
                     for r in range(2)])
    table = results_table(per_question_results(base), {
        ("saturated", "sft", None): per_question_results(run)}, k=8)
    rows = table.to_dicts()
    assert [r["replicates"] for r in rows] == [3, 2] and rows[1]["questions"] == 12
    per_question = [sum(run_right[r][q] for r in range(2)) / 16 for q in ids]
    base_values = [base_right[q] / 8 for q in ids]
    assert rows[1]["pass@1"] == pytest.approx(100 * sum(per_question) / 12)
    direct = paired_delta(per_question, base_values).scaled(100)
    assert (rows[1]["Δ pass@1"], rows[1]["Δ pass@1 low"], rows[1]["Δ pass@1 high"]) == (
        pytest.approx((direct.estimate, direct.low, direct.high)))
    assert direct.low < direct.estimate < direct.high


def test_each_night_adds_a_replicate_and_the_interval_narrows(tmp_path: Path) -> None:
    """Two nightly runs (the schedule's tag) of the embedded model's base eval report: the
    second holds one more replicate, twice the samples, and a narrower pass@1 interval."""
    from saturated_dag.evaluation.reports import per_question_results
    from saturated_dag.reporting.result_tables import results_table

    overrides = {"chain_sum": {"grid": {"terms": [3, 3], "digits": [1, 1]},
                               "questions_per_cell": 2, "strict_grid": None,
                               "eval_questions_per_cell": 24},
                 "sampling": {"n": 2, "max_new_tokens": 48}}
    assets, checks = graph("demo", overrides)
    base = by_name(assets, "chain_sum", "base")
    run_resources = resources(tmp_path / "out", "demo", overrides)
    nights = []
    with dg.instance_for_test() as instance:
        for _ in range(2):
            result = dg.materialize([*assets, *checks_of(checks, "chain_sum", "base")],
                                    selection=[a.key for a in base], instance=instance,
                                    resources=run_resources,
                                    tags={"saturated_dag/nightly": "true"})
            assert result.success
            assert all(c.passed for c in result.get_asset_check_evaluations())
            report = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", "eval", "base"))
            row = results_table(per_question_results(report), {}, k=2).row(0, named=True)
            nights.append((report, row))
    (first, one), (second, two) = nights
    assert first["replicate"].unique().to_list() == [0]
    assert sorted(second["replicate"].unique().to_list()) == [0, 1]
    assert second.height == 2 * first.height
    assert_frame_equal(second.filter(pl.col("replicate") == 0), first)  # night 1 kept
    assert (one["replicates"], two["replicates"]) == (1, 2)
    assert 0 < one["pass@1"] < 100  # the embedded model answers some, not all
    assert two["pass@1 high"] - two["pass@1 low"] < one["pass@1 high"] - one["pass@1 low"]


def test_after_a_nightly_replicate_every_caption_counts_questions(tmp_path: Path) -> None:
    """A nightly run (the schedule's tag) adds an eval replicate to every report: the results
    table, the sweep table and the runs table then read two rows per question and sample, and
    each caption still names the eval set's question count, not its question x replicate rows."""
    from assets.result_tables import SWEEP_ASSETS
    from saturated_dag.infra.atomic import atomic_write_parquet
    from tests.reporting.test_runs_table import BASE, OVERRIDES, TASK, _seed_inputs

    out = tmp_path / "out"
    _seed_inputs(out)
    for path in (out / "assets" / TASK).rglob("*.parquet"):  # each report: one more replicate
        frame = pl.read_parquet(path)
        if "replicate" in frame.columns:
            atomic_write_parquet(pl.concat([frame, frame.with_columns(
                pl.lit(1, dtype=frame["replicate"].dtype).alias("replicate"))]), path)
    assert pl.read_parquet(asset_path(out, TASK, "eval", "base"))["replicate"].n_unique() == 2
    everything, _ = graph("demo", OVERRIDES)
    tables = [a for a in everything if a.key.path[-1] in {
        "results_table", "runs_table", SWEEP_ASSETS["dpo_beta"]}]
    assert len(tables) == 3
    with dg.instance_for_test() as instance:
        result = dg.materialize(everything, selection=[a.key for a in tables],
                                resources=resources(out, "demo", OVERRIDES), instance=instance,
                                tags={"saturated_dag/nightly": "true"})
    assert result.success
    captions = [text for event in result.get_asset_materialization_events()
                for entry in event.materialization.metadata.values()
                if isinstance(text := getattr(entry, "value", None), str)]
    captions += [path.read_text() for path in (out / TASK).glob("*.md")]
    counted = [int(n) for text in captions
               for n in re.findall(r"\((\d+) questions|(\d+) eval questions", text)
               for n in n if n]
    assert len(counted) >= 6 and set(counted) == {len(BASE)}, counted
