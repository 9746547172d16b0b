"""The nightly evaluation schedule, on real (tiny) runs.

What the automation sensors request is tested in tests/orchestration/test_automation.py, code
versions in tests/orchestration/test_versioning.py.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from jobs import eval_targets, nightly_evaluation_job, nightly_evaluation_schedule
from resources.parquet_io import asset_file
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from tests.pipeline import graph, materialize, resources
from tests.scoring_data import make_partitions, make_pool


def _key(*path: str) -> dg.AssetKey:
    return dg.AssetKey(["chain_sum", *path])


def test_nightly_schedule_reevaluates_only_materialised_adapters(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    store = tmp_path / "out" / "assets"
    pool = make_pool()
    atomic_write_parquet(pool, store / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool),
                         store / "chain_sum" / "difficulty_partitions.parquet")
    overrides = {
        "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                      "strict_grid": None, "eval_questions_per_cell": 3},
        "sampling": {"n": 2, "max_new_tokens": 6},
        "training": {"splits": ["saturated"], "scorers": ["entropy"], "methods": ["sft", "dpo"],
                     "epochs": 1, "batch_size": 2, "per_device_batch_size": 2,
                     "learning_rate": 1e-2, "max_length": 128, "lora_r": 4, "lora_alpha": 8,
                     "validation_questions_per_cell": 1, "isolate": True,
                     "selection": {"learning_rates": None}},
        "policy": {"model": str(tiny_model_dir), "batch_size": 8},
    }
    assets, _ = graph("demo", overrides)
    evals = eval_targets(load_profile("demo", overrides))
    assert {t.key for t in evals} == {k for a in assets for k in a.keys if "eval" in k.path}
    job = nightly_evaluation_job([t.key for t in evals], load_profile("demo"))
    schedule = nightly_evaluation_schedule(job, evals)
    run_resources = resources(tmp_path / "out", "demo", overrides)
    defs = dg.Definitions(assets=assets, jobs=[job], schedules=[schedule],
                          resources=run_resources)
    with dg.instance_for_test() as instance:
        _run_nightly(instance, assets, defs, schedule, store, run_resources)


def _run_nightly(instance, assets, defs, schedule, store: Path, resources: dict) -> None:

    tick = schedule.evaluate_tick(dg.build_schedule_context(instance=instance))
    assert not tick.run_requests and "no adapter" in str(tick.skip_message)

    sft = _key("saturated", "adapter", "sft")
    assert materialize(assets, selection=[sft, _key("saturated", "sft_set")],
                          instance=instance, resources=resources).success
    tick = schedule.evaluate_tick(dg.build_schedule_context(instance=instance))
    (request,) = tick.run_requests
    assert set(request.asset_selection) == {_key("eval", "base"), _key("saturated", "eval", "sft")}

    result = defs.resolve_job_def("nightly_evaluation").execute_in_process(
        instance=instance, asset_selection=list(request.asset_selection), tags=request.tags)
    assert result.success
    for key in request.asset_selection:
        assert instance.get_latest_materialization_event(key) is not None
        report = pl.read_parquet(asset_file(store, key.path))
        counts = report.group_by("question_id").len()  # 3 questions, n=2 samples each
        assert counts.height == 3 and (counts["len"] == 2).all()
    dpo_eval = _key("saturated", "eval", "dpo_entropy")
    assert instance.get_latest_materialization_event(dpo_eval) is None
