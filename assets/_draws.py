"""The data's draws (``Profile.data_seeds``) as Dagster partitions of the pool-side assets.

With several data seeds, the generation pool, the difficulty partitions, every scorer's
scores, the scorer agreement table and every training dataset have one partition per data
seed (``data0``, ``data1``, ...): each draw shows in the UI and can be re-materialised on its
own. Each runs one draw per run (the Parquet IO manager stores one partition per output, and
``jobs/staged.py`` gives each draw a part of its own). An adapter's partition key names its data
seed (``lr0.001_data1_seed0``) and its dataset input maps to that draw's partition
(``dataset_mapping``). With one data seed nothing is partitioned: the graph of a one-draw
profile (``demo``) is what it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import dagster as dg
import polars as pl

from resources import ExperimentResource
from saturated_dag.config import Profile
from saturated_dag.experiments import Adapter, data_seed_key, data_seed_of

__all__ = ["FRAMES_BY_DRAW", "by_data_seed", "data_partitions", "dataset_mapping",
           "draw_file", "draw_profile", "partitioned_by_draw"]


FRAMES_BY_DRAW = dg.PythonObjectDagsterType(dict, name="FramesByDataSeed")
"""An input that maps to data-seed partitions: the Parquet IO manager loads it as a dict,
partition key -> frame, even when the step needs one draw only (an input annotated with a
dict type is always a dict, ``resources/parquet_io.py``)."""


def data_partitions(data_seeds: int) -> dg.StaticPartitionsDefinition | None:
    """One partition per data seed, or None for one draw."""
    if data_seeds == 1:
        return None
    return dg.StaticPartitionsDefinition([data_seed_key(d) for d in range(data_seeds)])


def draw_partition(context: dg.AssetExecutionContext) -> str | None:
    """The data-seed partition this step materialises (None: not partitioned). A run holds
    one draw of a pool-side asset: its partition key, or a range of one key (``jobs/staged``
    tags each draw's part with its key as the range's start and end)."""
    if context.assets_def.partitions_def is None:  # one draw (a run may hold adapter partitions)
        return None
    keys = list(context.partition_keys)
    if len(keys) != 1:
        raise dg.Failure(f"{context.asset_key.to_user_string()} materialises one data seed per "
                         f"run, not {len(keys)} ({', '.join(keys)}): launch one run per "
                         "partition (a multi-run backfill, or the job's parts)")
    return keys[0]


def draw_profile(context: dg.AssetExecutionContext,
                 experiment: ExperimentResource) -> Profile:
    """The profile for the draw this step materialises (``Profile.for_data_seed``): its
    training questions, pool sampling seed and scorers' random seed; the profile itself when
    the asset is not partitioned by draw."""
    profile = experiment.settings
    partition = draw_partition(context)
    if partition is None:
        return profile
    draw = profile.for_data_seed(data_seed_of(partition))
    context.log.info(f"data seed {draw.data_seed} of {profile.data_seeds}")
    return draw


def draw_file(context: dg.AssetExecutionContext, path: Path) -> Path:
    """A file a pool-side asset writes beside its frame (a figure, a CSV), one per draw:
    ``name_data1.png`` in a data-seed partition, ``name.png`` when not partitioned."""
    partition = draw_partition(context)
    if partition is None:
        return path
    return path.with_name(f"{path.stem}_{partition}{path.suffix}")


def partitioned_by_draw(assets: Iterable[dg.AssetsDefinition],
                        draws: dg.PartitionsDefinition | None) -> list[dg.AssetsDefinition]:
    """The pool-side assets with one partition per data seed (unchanged for one draw)."""
    if draws is None:
        return list(assets)
    return list(dg.map_asset_specs(
        lambda spec: spec.replace_attributes(partitions_def=draws), list(assets)))


def dataset_mapping(partitions: Mapping[str, Adapter]) -> dg.StaticPartitionMapping:
    """An adapter asset's dataset input: each data-seed partition of the dataset maps to the
    partition keys of the adapters that train on that draw."""
    by_draw: dict[str, list[str]] = {}
    for key, adapter in partitions.items():
        by_draw.setdefault(data_seed_key(adapter.data_seed), []).append(key)
    return dg.StaticPartitionMapping(by_draw)


def by_data_seed(loaded: pl.DataFrame | Mapping[str, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """A loaded pool-side input by data seed: one frame (one draw) is data seed 0's."""
    if isinstance(loaded, pl.DataFrame):
        return {0: loaded}
    return {data_seed_of(key): frame for key, frame in loaded.items()}
