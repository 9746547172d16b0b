"""Content-hash data versions (issue 14.2): a stage-cache hit that rewrites the same frame
keeps the asset's data version, so nothing downstream turns stale; new content does.

Staleness is read the way the UI reads it (Dagster's stale-status resolver), on the real pool
and partitions assets of the embedded model.
"""

from pathlib import Path

import dagster as dg
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from tests.pipeline import graph, resources

SMALL = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 3,
                       "strict_grid": None},
         "sampling": {"n": 2, "max_new_tokens": 24}, "stages": {"shard_questions": 2}}
POOL = dg.AssetKey(["chain_sum", "generation_pool"])
PARTS = dg.AssetKey(["chain_sum", "difficulty_partitions"])


def _status(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> StaleStatus:
    resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(),
                                          LoadingContextForTest(instance))
    return resolver.get_status(key)


def _version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    event = instance.get_latest_materialization_event(key)
    assert event is not None and event.asset_materialization is not None
    return event.asset_materialization.tags["dagster/data_version"]


def test_a_cache_hit_keeps_the_data_version_and_downstream_fresh(tmp_path: Path) -> None:
    assets, _ = graph("demo", SMALL)
    picked = [a for a in assets if a.key in (POOL, PARTS)]
    run = resources(tmp_path / "out", "demo", SMALL)
    defs = dg.Definitions(assets=picked, resources=run)
    with dg.instance_for_test() as instance:
        assert dg.materialize(picked, instance=instance, resources=run).success
        first = _version(instance, POOL)
        assert _status(defs, instance, PARTS) == StaleStatus.FRESH

        again = dg.materialize(picked, selection=[POOL], instance=instance, resources=run)
        meta = again.asset_materializations_for_node("chain_sum__generation_pool")[0].metadata
        assert meta["cache"].value == "hit"
        assert _version(instance, POOL) == first
        assert _status(defs, instance, PARTS) == StaleStatus.FRESH

        reseeded = {**SMALL, "sampling": {**SMALL["sampling"], "seed": 1}}
        assert dg.materialize(picked, selection=[POOL], instance=instance,
                              resources=resources(tmp_path / "out", "demo", reseeded)).success
        assert _version(instance, POOL) != first
        assert _status(defs, instance, PARTS) == StaleStatus.STALE
