"""The quality-score and agreement assets under dg.materialize, on a tiny random model.

The generation pool and partitions are written beforehand (a random model solves nothing, so
it could not produce saturated questions); the scorers then run as in the demo job.
"""

from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl

from saturated_dag.infra.atomic import atomic_write_parquet
from tests.pipeline import asset_path, checks_of, graph, resources
from tests.scoring_data import make_partitions, make_pool

SCORERS = ["entropy_scores", "self_judge_scores", "strong_judge_scores", "random_scores",
           "oracle_scores"]  # the demo lists the oracle in scoring.known_answer_scorers
OVERRIDES = {"scoring": {"judge_max_new_tokens": 6, "judge_batch_size": 8}}
RUBRIC = {"kind": "rubric"}


def _write_upstream(out: Path, task: str, pool: pl.DataFrame) -> None:
    atomic_write_parquet(pool, asset_path(out, task, "generation_pool"))
    atomic_write_parquet(make_partitions(pool), asset_path(out, task, "difficulty_partitions"))


def _overrides(model: str, task: str, strong: dict | None = None,
               extra: dict | None = None) -> dict:
    return {**OVERRIDES, **(extra or {}), "tasks": [task],
            "policy": {"model": model, "batch_size": 8},
            "judges": {"strong": strong or RUBRIC}}


def _materialize(tmp_path: Path, model: str, task: str, names: list[str],
                 strong: dict | None = None, **kw) -> dg.ExecuteInProcessResult:
    overrides = _overrides(model, task, strong)
    assets, checks = graph("demo", overrides)
    selection = dg.AssetSelection.assets(*[dg.AssetKey([task, n]) for n in names])
    return dg.materialize([*assets, *checks_of(checks, task, *names)], selection=selection,
                          resources=resources(tmp_path / "out", "demo", overrides), **kw)


def test_scores_and_agreement_on_the_demo_setup(tmp_path: Path, tiny_model_dir: Path) -> None:
    pool = make_pool().with_columns(  # teacher-forced for these
        mean_entropy=pl.when(pl.col("sample_index") == 2).then(None)
        .otherwise(pl.col("mean_entropy")))
    _write_upstream(tmp_path / "out", "chain_sum", pool)
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum",
                          [*SCORERS, "scorer_agreement"])
    assert result.success
    for name in SCORERS:
        scores = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", name))
        assert scores.height == 16 and np.isfinite(scores["score"].to_numpy()).all(), name
        assert {"question_id", "sample_index", "split", "scorer", "score"} <= set(scores.columns)
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 5 and all(c.passed for c in checks)

    def meta(name: str) -> dict:
        return result.asset_materializations_for_node(f"chain_sum__{name}")[0].metadata

    entropy = meta("entropy_scores")
    assert entropy["route_teacher_forced"].value == 4
    assert entropy["route_generation_pass"].value == 12
    judge = meta("self_judge_scores")
    assert judge["judge_calls"].value == judge["expected_judge_calls"].value == 4 * 6
    assert judge["parse_failures"].value == 0
    assert judge["forced_judgments"].value == 24  # a random model never writes a judgment
    assert meta("strong_judge_scores")["judge"].value == "rubric"
    assert (tmp_path / "out" / "chain_sum" / "self_judge_comparisons.parquet").is_file()
    agree = meta("scorer_agreement")
    rows = [r.data for r in agree["agreement table"].value.records]
    pairs = {r["scorers"] for r in rows}
    assert {"entropy vs random", "entropy vs strong_judge", "self_judge vs strong_judge",
            "random vs strong_judge", "oracle vs self_judge", "entropy vs oracle"} <= pairs
    assert not any("rubric" in pair for pair in pairs)  # the strong judge is the rubric
    assert "nan" not in agree["agreement table (Markdown)"].value.lower()
    assert agree["scorer_pairs"].value == 10  # 5 scorers: the rubric is the strong judge
    assert (tmp_path / "out" / "chain_sum" / "scorer_agreement_rho.png").is_file()
    csv = pl.read_csv(tmp_path / "out" / "chain_sum" / "scorer_agreement.csv")
    assert {"questions", "mean_rho", "median_rho", "pct_positive"} <= set(csv.columns)


def test_llm_strong_judge_and_gsm8k_rubric_refusal(tmp_path: Path, tiny_model_dir: Path) -> None:
    _write_upstream(tmp_path / "out", "chain_sum", make_pool())
    strong = {"kind": "llm", "model": str(tiny_model_dir), "batch_size": 8, "instruct": True}
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum", ["strong_judge_scores"],
                          strong=strong)
    assert result.success
    meta = result.asset_materializations_for_node("chain_sum__strong_judge_scores")[0].metadata
    assert meta["judge_calls"].value == 24 and meta["judge"].value.endswith("(transformers)")

    gsm = make_pool().with_columns(task=pl.lit("gsm8k"))
    _write_upstream(tmp_path / "out", "gsm8k", gsm)
    result = _materialize(tmp_path, str(tiny_model_dir), "gsm8k", ["strong_judge_scores"],
                          raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "chain_sum only" in str(failure.step_failure_data.error)


def test_nothing_to_score_gives_empty_tables_not_errors(tmp_path: Path,
                                                        tiny_model_dir: Path) -> None:
    """A weak policy: no saturated question, no hard question with a correct completion."""
    _write_upstream(tmp_path / "out", "chain_sum", make_pool().with_columns(correct=pl.lit(False)))
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum",
                          [*SCORERS, "scorer_agreement"])
    assert result.success
    for name in SCORERS:
        assert pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", name)).is_empty()
    meta = result.asset_materializations_for_node("chain_sum__scorer_agreement")[0].metadata
    assert "nan" not in meta["agreement table (Markdown)"].value.lower()
    assert all(c.passed for c in result.get_asset_check_evaluations())


def test_empty_split_fails_the_dataset_with_its_reason_and_writes_nothing(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    _write_upstream(tmp_path / "out", "chain_sum", make_pool().with_columns(correct=pl.lit(False)))
    overrides = _overrides(str(tiny_model_dir), "chain_sum", extra={
        "training": {"splits": ["saturated"], "scorers": ["entropy"], "methods": ["dpo"]}})
    assets, _ = graph("demo", overrides)
    keys = [dg.AssetKey(["chain_sum", "entropy_scores"]),
            dg.AssetKey(["chain_sum", "saturated", "dpo_pairs", "entropy"])]
    result = dg.materialize(assets, selection=keys, raise_on_error=False,
                            resources=resources(tmp_path / "out", "demo", overrides))
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "no usable questions in split 'saturated'" in str(failure.step_failure_data.error)
    assert not (tmp_path / "out" / "assets" / "chain_sum" / "saturated" / "dpo_pairs").exists()
