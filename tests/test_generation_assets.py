"""The generation pool and difficulty partitions as Dagster assets, on a tiny model."""

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets import ALL_ASSET_CHECKS, ALL_ASSETS
from resources import ExperimentResource, GenerationResource, ParquetIOManager

TINY = {
    "chain_sum": {
        "grid": {"terms": [2, 3], "digits": [1, 1]},
        "questions_per_cell": 2,
        "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
        "strict_questions_per_cell": 2,
    },
    "sampling": {"n": 3, "max_new_tokens": 8},
}


def _resources(tmp_path: Path, model: str, overrides: dict | None = None) -> dict:
    return {
        "experiment": ExperimentResource(
            profile="demo", overrides_json=json.dumps(overrides or TINY),
            output_dir=str(tmp_path / "out")),
        "policy": GenerationResource(model=model, batch_size=8),
        "parquet_io": ParquetIOManager(base_dir=str(tmp_path / "assets")),
    }


GENERATION = ("generation_pool", "difficulty_partitions")


def _selection(task: str) -> list:
    return [a for a in ALL_ASSETS if a.key.path[0] == task and a.key.path[-1] in GENERATION]


def _checks(task: str) -> list:
    return [c for c in ALL_ASSET_CHECKS
            if next(iter(c.check_keys)).asset_key.path[0] == task
            and next(iter(c.check_keys)).asset_key.path[-1] in GENERATION]


def test_materialize_pool_and_partitions(tmp_path: Path, tiny_model_dir: Path) -> None:
    result = dg.materialize([*_selection("chain_sum"), *_checks("chain_sum")],
                            resources=_resources(tmp_path, str(tiny_model_dir)))
    assert result.success
    pool = pd.read_parquet(tmp_path / "assets" / "chain_sum" / "generation_pool.parquet")
    assert len(pool) == (2 * 2 + 2) * 3
    assert set(pool["pool"]) == {"D", "D_prime"}
    assert pool.groupby("question_id")["sample_index"].nunique().eq(3).all()
    assert pool["mean_entropy"].notna().all() and (pool["num_tokens"] <= 8).all()
    splits = pd.read_parquet(tmp_path / "assets" / "chain_sum" / "difficulty_partitions.parquet")
    assert len(splits) == 6
    assert set(splits.loc[splits["pool"] == "D_prime", "split"]) <= {
        "strict_saturated", "strict_excluded"}
    # a random model answers nothing: every D question is hard
    assert (splits.loc[splits["pool"] == "D", "split"] == "hard").all()
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 2 and all(c.passed for c in checks)
    pool_meta = result.asset_materializations_for_node("chain_sum__generation_pool")[0].metadata
    unanswered = int(pool["answer"].isna().sum() + (pool["answer"] == "").sum())
    assert pool_meta["completions_without_answer"].value == unanswered > 0
    assert not pool.loc[pool["answer"].isna(), "correct"].any()
    meta = result.asset_materializations_for_node("chain_sum__difficulty_partitions")[0].metadata
    assert meta["count_hard"].value == 4
    assert "pass@1 heatmap" in meta and (tmp_path / "out" / "chain_sum"
                                         / "pass_at_1_heatmap.png").is_file()
    logs = [e.message for e in result.all_events if e.event_type_value == "ENGINE_EVENT"
            or e.is_step_event]
    assert logs


def test_gsm8k_pool_from_local_folder(tmp_path: Path, tiny_model_dir: Path) -> None:
    overrides = {"tasks": ["gsm8k"], "gsm8k": {"train_limit": 3},
                 "sampling": {"n": 2, "max_new_tokens": 4}}
    result = dg.materialize(_selection("gsm8k"),
                            resources=_resources(tmp_path, str(tiny_model_dir), overrides))
    assert result.success
    splits = pd.read_parquet(tmp_path / "assets" / "gsm8k" / "difficulty_partitions.parquet")
    assert len(splits) == 3 and set(splits["pool"]) == {"D"}


@pytest.mark.parametrize(
    ("model", "overrides", "message"),
    [
        ("gpt-17", TINY, "unknown model name 'gpt-17'"),
        ("/nonexistent/model", TINY, "model path not found"),
        (None, {**TINY, "chain_sum": {"grid": {"terms": [3, 2], "digits": [1, 1]}}},
         "grid is empty"),
        (None, {"tasks": ["gsm8k"], "gsm8k": {"source": "/nonexistent/gsm8k"}},
         "GSM8K folder not found"),
    ],
)
def test_bad_input_fails_clearly_and_writes_nothing(
    tmp_path: Path, tiny_model_dir: Path, model: str | None, overrides: dict, message: str
) -> None:
    task = overrides.get("tasks", ["chain_sum"])[0]
    result = dg.materialize(
        _selection(task),
        resources=_resources(tmp_path, model or str(tiny_model_dir), overrides),
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert message in str(failure.step_failure_data.error)
    assert not (tmp_path / "assets").exists()


def test_failed_rerun_keeps_previous_materialisation(tmp_path: Path, tiny_model_dir: Path) -> None:
    assert dg.materialize(_selection("chain_sum"),
                          resources=_resources(tmp_path, str(tiny_model_dir))).success
    path = tmp_path / "assets" / "chain_sum" / "generation_pool.parquet"
    before = path.read_bytes()
    result = dg.materialize(_selection("chain_sum"),
                            resources=_resources(tmp_path, "gpt-17"), raise_on_error=False)
    assert not result.success and path.read_bytes() == before
