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


def _failure(result) -> str:
    """The message of the run's failed step, with its cause."""
    failure = next(e for r in result.runs for e in r.all_events if e.is_step_failure)
    return failure.step_failure_data.error.to_string()


def test_an_edited_file_is_refused_by_a_new_instance_on_the_same_outputs(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Issue 67: a file proves its content itself (the content hash in its own Parquet
    metadata), so an edit is refused whatever the instance remembers. The slice that trains
    and evaluates one SFT adapter runs once; then, each time through a new instance (a
    deleted ``DAGSTER_HOME``, another machine, a UI started on existing outputs):

    * an eval report whose every answer is marked right: the results table is refused,
      naming the file and the asset to re-materialise (the probe: the saturated SFT row went
      from Δ -1.56 to +51.56 with no warning); the same rows rewritten without the pipeline's
      hash are refused too;
    * a table the pipeline reads (the difficulty partitions, read by the SFT set): refused.
    """
    import polars as pl

    from saturated_dag.infra.atomic import PROOF_KEY
    from tests.pipeline import ONE_SFT_ADAPTER, ancestors, asset_path, materialize
    from tests.scoring_data import store_pool_and_partitions

    out = tmp_path / "out"
    store_pool_and_partitions(out)
    overrides = {**ONE_SFT_ADAPTER, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    assets, _ = graph("demo", overrides)
    run = resources(out, "demo", overrides)
    table = dg.AssetKey(["chain_sum", "results_table"])
    seeded = {POOL, PARTS, dg.AssetKey("base_model")}
    with dg.instance_for_test() as first:
        assert materialize(assets, [*(ancestors(assets, table) - seeded), table],
                           instance=first, resources=run).success

    def fresh_run(key: dg.AssetKey):
        with dg.instance_for_test() as fresh:
            return materialize(assets, [key], instance=fresh, resources=run,
                               raise_on_error=False)

    report = asset_path(out, "chain_sum", "saturated", "eval", "sft")
    written, proof = pl.read_parquet(report), pl.read_parquet_metadata(report)
    edited = written.with_columns(correct=pl.lit(True))
    edited.write_parquet(report)  # as polars writes it: without the pipeline's hash
    message = _failure(fresh_run(table))
    assert str(report) in message and "carries no content hash" in message, message
    assert "re-materialise chain_sum/saturated/eval/sft" in message, message
    edited.write_parquet(report, metadata={PROOF_KEY: proof[PROOF_KEY]})  # the hash kept
    message = _failure(fresh_run(table))
    assert str(report) in message and "was changed after it was written" in message, message

    parts = asset_path(out, "chain_sum", "difficulty_partitions")
    pl.read_parquet(parts).with_columns(split=pl.lit("saturated")).write_parquet(parts)
    message = _failure(fresh_run(dg.AssetKey(["chain_sum", "saturated", "sft_set"])))
    assert str(parts) in message and "re-materialise chain_sum/difficulty_partitions" in message


def test_an_edited_stage_shard_is_computed_again_by_a_new_instance(tmp_path: Path) -> None:
    """Issue 67: a stage shard proves itself by the hash its stage's manifest recorded, not
    by what an instance remembers: edited, then the pool materialised through a new instance,
    the shard is not reused (the log names it) but computed again, and the pool is the one
    an uninterrupted run wrote."""
    import polars as pl
    from polars.testing import assert_frame_equal

    from tests.pipeline import asset_path

    assets, _ = graph("demo", SMALL)
    picked = [a for a in assets if a.key == POOL]
    out = tmp_path / "out"
    run = resources(out, "demo", SMALL)
    with dg.instance_for_test() as first:
        assert dg.materialize(picked, instance=first, resources=run).success
    pool_file = asset_path(out, "chain_sum", "generation_pool")
    pool = pl.read_parquet(pool_file)
    shard = sorted(out.glob("stages/**/shard-*.parquet"))[0]
    pl.read_parquet(shard).with_columns(completion=pl.lit("edited")).write_parquet(shard)
    with dg.instance_for_test() as fresh:
        result = dg.materialize(picked, instance=fresh, resources=run)
        assert result.success
        said = [e.user_message for e in fresh.all_logs(result.run_id)]
    assert any(str(shard) in m and "does not match the hash its stage recorded" in m
               for m in said), said
    assert_frame_equal(pl.read_parquet(pool_file), pool)
