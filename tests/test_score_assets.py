"""The quality-score and agreement assets under dg.materialize, on a tiny random model.

The generation pool and partitions are written beforehand (a random model solves nothing, so
it could not produce saturated questions); the scorers then run as in the demo job.
"""

import json
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd

from assets import ALL_ASSET_CHECKS, ALL_ASSETS
from resources import ExperimentResource, GenerationResource, JudgeResource, ParquetIOManager
from resources.parquet_io import atomic_write_parquet
from tests.scoring_data import make_partitions, make_pool

SCORERS = ["entropy_scores", "self_judge_scores", "strong_judge_scores", "random_scores"]
OVERRIDES = {"scoring": {"judge_max_new_tokens": 6, "judge_batch_size": 8}}


def _write_upstream(base: Path, task: str, pool: pd.DataFrame) -> None:
    atomic_write_parquet(pool, base / task / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool), base / task / "difficulty_partitions.parquet")


def _resources(tmp_path: Path, model: str, strong: JudgeResource) -> dict:
    return {
        "experiment": ExperimentResource(profile="demo", overrides_json=json.dumps(OVERRIDES),
                                         output_dir=str(tmp_path / "out")),
        "policy": GenerationResource(model=model, batch_size=8),
        "strong_judge": strong,
        "parquet_io": ParquetIOManager(base_dir=str(tmp_path / "assets")),
    }


def _materialize(tmp_path: Path, model: str, task: str, names: list[str],
                 strong: JudgeResource | None = None, **kw) -> dg.ExecuteInProcessResult:
    assets = [a for a in ALL_ASSETS if a.key.path[0] == task or a.key.path == ["base_model"]]
    checks = [c for c in ALL_ASSET_CHECKS
              if next(iter(c.check_keys)).asset_key.path[0] == task
              and next(iter(c.check_keys)).asset_key.path[1] in names]
    selection = dg.AssetSelection.assets(*[dg.AssetKey([task, n]) for n in names])
    return dg.materialize([*assets, *checks], selection=selection,
                          resources=_resources(tmp_path, model, strong or JudgeResource()), **kw)


def test_scores_and_agreement_on_the_demo_setup(tmp_path: Path, tiny_model_dir: Path) -> None:
    pool = make_pool()
    pool.loc[pool["sample_index"] == 2, "mean_entropy"] = np.nan  # teacher-forced for these
    _write_upstream(tmp_path / "assets", "chain_sum", pool)
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum",
                          [*SCORERS, "scorer_agreement"])
    assert result.success
    base = tmp_path / "assets" / "chain_sum"
    for name in SCORERS:
        scores = pd.read_parquet(base / f"{name}.parquet")
        assert len(scores) == 16 and np.isfinite(scores["score"]).all(), name
        assert {"question_id", "sample_index", "split", "scorer", "score"} <= set(scores.columns)
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 4 and all(c.passed for c in checks)

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
    table = agree["agreement table"].value
    for pair in ["entropy vs random", "entropy vs rubric", "self_judge vs strong_judge",
                 "random vs rubric"]:
        assert pair in table
    assert "nan" not in table.lower()
    assert agree["scorer_pairs"].value == 10  # 5 scorers with the rubric
    assert (tmp_path / "out" / "chain_sum" / "scorer_agreement_rho.png").is_file()
    csv = pd.read_csv(tmp_path / "out" / "chain_sum" / "scorer_agreement.csv")
    assert {"questions", "mean_rho", "median_rho", "pct_positive"} <= set(csv.columns)


def test_llm_strong_judge_and_gsm8k_rubric_refusal(tmp_path: Path, tiny_model_dir: Path) -> None:
    _write_upstream(tmp_path / "assets", "chain_sum", make_pool())
    strong = JudgeResource(kind="llm", model=str(tiny_model_dir), batch_size=8, instruct=True)
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum", ["strong_judge_scores"],
                          strong=strong)
    assert result.success
    meta = result.asset_materializations_for_node("chain_sum__strong_judge_scores")[0].metadata
    assert meta["judge_calls"].value == 24 and meta["judge"].value.endswith("(transformers)")

    gsm = make_pool().assign(task="gsm8k")
    _write_upstream(tmp_path / "assets", "gsm8k", gsm)
    result = _materialize(tmp_path, str(tiny_model_dir), "gsm8k", ["strong_judge_scores"],
                          raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "chain_sum only" in str(failure.step_failure_data.error)


def test_nothing_to_score_gives_empty_tables_not_errors(tmp_path: Path,
                                                        tiny_model_dir: Path) -> None:
    """A weak policy: no saturated question, no hard question with a correct completion."""
    _write_upstream(tmp_path / "assets", "chain_sum", make_pool().assign(correct=False))
    result = _materialize(tmp_path, str(tiny_model_dir), "chain_sum",
                          [*SCORERS, "scorer_agreement"])
    assert result.success
    for name in SCORERS:
        assert pd.read_parquet(tmp_path / "assets" / "chain_sum" / f"{name}.parquet").empty
    meta = result.asset_materializations_for_node("chain_sum__scorer_agreement")[0].metadata
    assert "nan" not in meta["agreement table"].value.lower()
    assert all(c.passed for c in result.get_asset_check_evaluations())


def test_empty_split_fails_the_dataset_with_its_reason_and_writes_nothing(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    from assets import experiment_assets
    from saturated_dag.config import load_profile

    _write_upstream(tmp_path / "assets", "chain_sum", make_pool().assign(correct=False))
    profile = load_profile("demo", {"training": {"splits": ["saturated"],
                                                 "scorers": ["entropy"], "methods": ["dpo"]}})
    assets = [*ALL_ASSETS, *experiment_assets(profile)]
    keys = [dg.AssetKey(["chain_sum", "entropy_scores"]),
            dg.AssetKey(["chain_sum", "saturated", "dpo_pairs", "entropy"])]
    result = dg.materialize(assets, selection=keys, raise_on_error=False,
                            resources=_resources(tmp_path, str(tiny_model_dir),
                                                 JudgeResource(kind="rubric")))
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "no usable questions in split 'saturated'" in str(failure.step_failure_data.error)
    assert not (tmp_path / "assets" / "chain_sum" / "saturated" / "dpo_pairs").exists()
