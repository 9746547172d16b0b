"""The generation pool and difficulty partitions as Dagster assets, on a tiny model."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from saturated_dag.config import ProfileError
from tests.pipeline import asset_path, by_name, checks_of, graph, resources

TINY = {
    "chain_sum": {
        "grid": {"terms": [2, 3], "digits": [1, 1]},
        "questions_per_cell": 2,
        "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
        "strict_questions_per_cell": 2,
    },
    "sampling": {"n": 3, "max_new_tokens": 8},
}
GENERATION = ("generation_pool", "difficulty_partitions")


def _run(tmp_path: Path, model: str, overrides: dict | None = None,
         with_checks: bool = False, **kwargs) -> dg.ExecuteInProcessResult:
    """Materialise the pool and partitions of the overrides' task on ``model``."""
    overrides = dict(overrides or TINY)
    task = overrides.get("tasks", ["chain_sum"])[0]
    overrides["policy"] = {"model": model, "batch_size": 8}
    assets, checks = graph("demo", overrides)
    picked = by_name(assets, task, *GENERATION)
    if with_checks:
        picked += checks_of(checks, task, *GENERATION)
    return dg.materialize(picked, resources=resources(tmp_path / "out", "demo", overrides),
                          **kwargs)


def test_materialize_pool_and_partitions(tmp_path: Path, tiny_model_dir: Path) -> None:
    result = _run(tmp_path, str(tiny_model_dir), with_checks=True)
    assert result.success
    pool = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", "generation_pool"))
    assert pool.height == (2 * 2 + 2) * 3
    assert set(pool["pool"]) == {"D", "D_prime"}
    samples = pool.group_by("question_id").agg(pl.col("sample_index").n_unique())
    assert (samples["sample_index"] == 3).all()
    assert pool["mean_entropy"].is_not_null().all() and (pool["num_tokens"] <= 8).all()
    splits = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", "difficulty_partitions"))
    assert splits.height == 6
    assert set(splits.filter(pl.col("pool") == "D_prime")["split"]) <= {
        "strict_saturated", "strict_excluded"}
    # a random model answers nothing: every D question is hard
    assert (splits.filter(pl.col("pool") == "D")["split"] == "hard").all()
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 2 and all(c.passed for c in checks)
    pool_meta = result.asset_materializations_for_node("chain_sum__generation_pool")[0].metadata
    unanswered = int(pool["answer"].is_null().sum() + (pool["answer"] == "").sum())
    assert pool_meta["completions_without_answer"].value == unanswered > 0
    assert not pool.filter(pl.col("answer").is_null())["correct"].any()
    assert pool_meta["dagster/row_count"].value == pool.height
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
    result = _run(tmp_path, str(tiny_model_dir), overrides)
    assert result.success
    splits = pl.read_parquet(asset_path(tmp_path / "out", "gsm8k", "difficulty_partitions"))
    assert splits.height == 3 and set(splits["pool"]) == {"D"}


@pytest.mark.parametrize(
    ("model", "overrides", "message"),
    [
        ("gpt-17", TINY, "unknown model name 'gpt-17'"),
        ("/nonexistent/model", TINY, "model path not found"),
        (None, {**TINY, "chain_sum": {"grid": {"terms": [3, 2], "digits": [1, 1]}}},
         "must be an increasing range"),
        (None, {"tasks": ["gsm8k"], "gsm8k": {"source": "/nonexistent/gsm8k"}},
         "GSM8K folder not found"),
    ],
)
def test_bad_input_fails_clearly_and_writes_nothing(
    tmp_path: Path, tiny_model_dir: Path, model: str | None, overrides: dict, message: str
) -> None:
    try:
        result = _run(tmp_path, model or str(tiny_model_dir), overrides, raise_on_error=False)
    except ProfileError as err:  # caught when the graph is built, before any step
        assert message in str(err)
    else:
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure)
        assert message in str(failure.step_failure_data.error)
    assert not (tmp_path / "out" / "assets").exists()


def test_failed_rerun_keeps_previous_materialisation(tmp_path: Path, tiny_model_dir: Path) -> None:
    assert _run(tmp_path, str(tiny_model_dir)).success
    path = asset_path(tmp_path / "out", "chain_sum", "generation_pool")
    before = path.read_bytes()
    result = _run(tmp_path, "gpt-17", raise_on_error=False)
    assert not result.success and path.read_bytes() == before
