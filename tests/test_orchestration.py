"""Lineage-aware recomputation and the nightly evaluation schedule, on real (tiny) runs.

The automation tests run the real pool asset on the embedded model (a random model saturates
nothing, so scores would have nothing to rank) at a few questions, evaluate the automation
conditions as the sensor does, tick by tick, and check what they request.
"""

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets import ALL_ASSETS, experiment_assets
from assets.automation import with_lineage
from jobs import eval_keys, nightly_evaluation_job, nightly_evaluation_schedule
from resources import ExperimentResource, GenerationResource, JudgeResource, ParquetIOManager
from resources.parquet_io import asset_file, atomic_write_parquet
from saturated_dag.config import load_profile
from tests.scoring_data import make_partitions, make_pool

SMALL = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 4,
                  "strict_grid": None, "eval_questions_per_cell": 2},
    "sampling": {"n": 4},
    "training": {"splits": ["saturated"], "scorers": ["self_judge", "entropy"],
                 "methods": ["dpo"], "validation_questions_per_cell": 1},
}
SCORES = ["entropy_scores", "self_judge_scores", "strong_judge_scores", "random_scores"]


def _key(*path: str) -> dg.AssetKey:
    return dg.AssetKey(["chain_sum", *path])


def _resources(tmp_path: Path, overrides: dict, model: str = "arith-base") -> dict:
    return {
        "experiment": ExperimentResource(profile="demo", overrides_json=json.dumps(overrides),
                                         output_dir=str(tmp_path / "out")),
        "policy": GenerationResource(model=model, batch_size=64),
        "strong_judge": JudgeResource(kind="rubric"),
        "parquet_io": ParquetIOManager(base_dir=str(tmp_path / "assets")),
    }


def _graph(entropy_version: str | None = None) -> list[dg.AssetsDefinition]:
    """Pool -> partitions -> scores -> agreement and saturated DPO pairs, with lineage."""
    wanted = {dg.AssetKey("base_model"), _key("generation_pool"), _key("difficulty_partitions"),
              *(_key(s) for s in SCORES), _key("scorer_agreement"),
              _key("saturated", "dpo_pairs", "self_judge"),
              _key("saturated", "dpo_pairs", "entropy")}
    profile = load_profile("demo", SMALL)
    assets = [a for a in [*ALL_ASSETS, *experiment_assets(profile)] if a.key in wanted]
    assets = with_lineage(assets)
    if entropy_version is not None:  # as if the entropy scorer's source had changed
        assets = list(dg.map_asset_specs(
            lambda s: s.replace_attributes(code_version=entropy_version)
            if s.key == _key("entropy_scores") else s, assets))
    return assets


def _sensor_ticks(assets, instance, resources, cursor) -> tuple[set[dg.AssetKey], object]:
    """Evaluate the automation conditions and materialise what they request, until quiet."""
    requested: set[dg.AssetKey] = set()
    for _ in range(6):
        defs = dg.Definitions(assets=assets, resources=resources)
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        cursor = result.cursor
        keys = {key for a in assets for key in a.keys if result.get_num_requested(key)}
        if not keys:
            return requested, cursor
        requested |= keys
        assert dg.materialize(assets, selection=list(keys), instance=instance,
                              resources=resources).success
    raise AssertionError("automation kept requesting after six ticks")


def test_new_pool_marks_exactly_its_descendants_and_entropy_code_only_its_own(
        tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    resources = _resources(tmp_path, SMALL)
    assets = _graph()
    assert dg.materialize(assets, instance=instance, resources=resources).success
    requested, cursor = _sensor_ticks(assets, instance, resources, None)
    assert requested == set()  # everything is up to date

    pool_path = tmp_path / "assets" / "chain_sum" / "generation_pool.parquet"
    first = pd.read_parquet(pool_path)
    reseeded = _resources(tmp_path, {**SMALL, "sampling": {"n": 4, "seed": 1}})
    assert dg.materialize(assets, selection=[_key("generation_pool")], instance=instance,
                          resources=reseeded).success
    assert not pd.read_parquet(pool_path)["completion"].equals(first["completion"])
    requested, cursor = _sensor_ticks(assets, instance, reseeded, cursor)
    descendants = dg.AssetSelection.assets(_key("generation_pool")).downstream(
        include_self=False).resolve(assets)
    assert requested == descendants
    assert _key("saturated", "dpo_pairs", "self_judge") in requested

    changed = _graph(entropy_version="entropy-v2")
    requested, _ = _sensor_ticks(changed, instance, reseeded, cursor)
    assert requested == {_key("entropy_scores"), _key("scorer_agreement"),
                         _key("saturated", "dpo_pairs", "entropy")}
    untouched = {_key("self_judge_scores"), _key("saturated", "dpo_pairs", "self_judge")}
    assert not requested & untouched


def test_nightly_schedule_reevaluates_only_materialised_adapters(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    store = tmp_path / "assets"
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
                     "validation_questions_per_cell": 1, "isolate": True},
    }
    profile = load_profile("demo", overrides)
    assets = with_lineage([*ALL_ASSETS, *experiment_assets(profile)])
    evals = eval_keys(assets)
    job = nightly_evaluation_job(evals)
    schedule = nightly_evaluation_schedule(job, evals)
    resources = _resources(tmp_path, overrides, model=str(tiny_model_dir))
    resources["policy"] = GenerationResource(model=str(tiny_model_dir), batch_size=8)
    defs = dg.Definitions(assets=assets, jobs=[job], schedules=[schedule], resources=resources)
    with dg.instance_for_test() as instance:
        _run_nightly(instance, assets, defs, schedule, store, resources)


def _run_nightly(instance, assets, defs, schedule, store: Path, resources: dict) -> None:

    tick = schedule.evaluate_tick(dg.build_schedule_context(instance=instance))
    assert not tick.run_requests and "no adapter" in str(tick.skip_message)

    sft = _key("saturated", "adapter", "sft")
    assert dg.materialize(assets, selection=[sft, _key("saturated", "sft_set")],
                          instance=instance, resources=resources).success
    tick = schedule.evaluate_tick(dg.build_schedule_context(instance=instance))
    (request,) = tick.run_requests
    assert set(request.asset_selection) == {_key("eval", "base"), _key("saturated", "eval", "sft")}

    result = defs.resolve_job_def("nightly_evaluation").execute_in_process(
        instance=instance, asset_selection=list(request.asset_selection), tags=request.tags)
    assert result.success
    for key in request.asset_selection:
        assert instance.get_latest_materialization_event(key) is not None
        report = pd.read_parquet(asset_file(store, key.path))
        assert len(report) == 3 and (report["n"] == 2).all()
    dpo_eval = _key("saturated", "eval", "dpo_entropy")
    assert instance.get_latest_materialization_event(dpo_eval) is None


@pytest.mark.parametrize("profile", ["demo", "ci", "paper"])
def test_every_asset_has_a_source_derived_version_and_downstream_automation(
        profile: str) -> None:
    assets = with_lineage([*ALL_ASSETS, *experiment_assets(load_profile(profile))])
    for a in assets:
        for key in a.keys:
            assert "-" in a.code_versions_by_key[key]
            condition = a.automation_conditions_by_key.get(key)
            assert (condition is None) == (key == dg.AssetKey("base_model"))
