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


def test_a_stored_file_edited_behind_dagsters_back_is_refused(tmp_path: Path) -> None:
    """Issue 15.6: one sample per question removed from the stored pool file, then the
    partitions re-materialised. Before, p-hat came out over n-1 samples with a passing check;
    now the read fails naming the file, and the partitions keep their previous file."""
    import polars as pl

    from tests.pipeline import asset_path

    assets, _ = graph("demo", SMALL)
    picked = [a for a in assets if a.key in (POOL, PARTS)]
    run = resources(tmp_path / "out", "demo", SMALL)
    with dg.instance_for_test() as instance:
        assert dg.materialize(picked, instance=instance, resources=run).success
        pool_file = asset_path(tmp_path / "out", "chain_sum", "generation_pool")
        parts_file = asset_path(tmp_path / "out", "chain_sum", "difficulty_partitions")
        before = parts_file.read_bytes()
        pool = pl.read_parquet(pool_file)
        pool.filter(pl.col("sample_index") != 0).write_parquet(pool_file)
        result = dg.materialize(picked, selection=[PARTS], instance=instance, resources=run,
                                raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure)
        message = str(failure.step_failure_data.error)
        assert str(pool_file) in message and "rows" in message
        assert parts_file.read_bytes() == before

        # same rows, one value changed: the content hash catches it
        pool.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("edited"))
                          .otherwise(pl.col("completion")).alias("completion")
                          ).write_parquet(pool_file)
        result = dg.materialize(picked, selection=[PARTS], instance=instance, resources=run,
                                raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure)
        assert "differs from what the materialisation" in str(failure.step_failure_data.error)

        # restored (re-materialised): reads again
        assert dg.materialize(picked, instance=instance, resources=run).success
