"""Shard stores and cache reporting for the expensive assets (``saturated_dag.infra.shards``).

Why one helper: generation, judging, entropy and eval reports key their shards the same way
and say the same thing in the run log and metadata ("cache hit: ..."), so a re-run that
reuses stored work is visible in the UI, not silent.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from assets.versioning import code_version_of
from resources import ExperimentResource
from saturated_dag.config import PolicySettings
from saturated_dag.generation.models import model_fingerprint
from saturated_dag.infra.atomic import OutputWriteError
from saturated_dag.infra.shards import ShardStats, ShardStore, readable_digest, stage_key


def policy_identity(settings: PolicySettings) -> dict[str, Any]:
    """What about the policy changes its samples: its settings and its files' hash."""
    return {**settings.model_dump(mode="json"), "fingerprint": model_fingerprint(settings.model)}


def stage_folder(stage: str) -> str:
    """The folder of a stage under ``<output_dir>/stages/``: its name, ``/`` written ``__``.

    Every asset that opens a store names its stage by its own asset key
    (``chain_sum/hard/eval/rrhf_self_judge_lambda0.01`` ->
    ``chain_sum__hard__eval__rrhf_self_judge_lambda0.01``); nothing is cut at a dot. The key
    folder below it hashes the full stage name too (``stage_key``), so even two stage names
    that wrote the same folder would never share a key folder.
    """
    return stage.replace("/", "__")


def open_store(context: dg.AssetExecutionContext, experiment: ExperimentResource,
               config: dict[str, Any], inputs: dict[str, Any]) -> tuple[ShardStore | None, str]:
    """The stage's shard store (``None`` when ``stages.cache`` is off) and its key.

    The stage is the calling asset's key joined by ``/`` and the store lives in
    ``<output_dir>/stages/<stage_folder(stage)>/<key>/``; the key covers the asset's code
    version, so editing any module the asset imports gives a new key.
    """
    stage = "/".join(context.asset_key.path)
    code_version = code_version_of(context)
    stages = experiment.settings.stages
    key = stage_key(stage, code_version, {**config, "shard_questions": stages.shard_questions},
                    inputs)
    if not stages.cache:
        return None, key
    return ShardStore.for_stage(experiment.output_dir, stage_folder(stage), key), key


STAGE_FOLDER_KEY = "stage folder (in stages/)"
"""Metadata: the stage's folder in the output folder's ``stages/`` (the asset key joined by
``__``); its shards are in ``<cache_key>/`` there."""


def cache_metadata(context: dg.AssetExecutionContext, key: str,
                   store: ShardStore | None) -> dict[str, Any]:
    """Log how the stage used its shards and return the matching metadata."""
    stage = "/".join(context.asset_key.path)
    if store is None or store.last_stats is None:
        context.log.info(f"cache off: {stage} {key[:12]} computed in memory")
        return {"cache": "off", "cache_key": readable_digest(key)}
    stats: ShardStats = store.last_stats
    context.log.info(stats.message(stage))
    # the shards are in <output folder>/stages/<stage folder>/<cache_key>: short entries
    # rather than one long path, which would widen the UI's metadata table past its panel;
    # the key in groups of 16 digits (``readable_digest``)
    return {**stats.metadata(), "cache_key": readable_digest(key),
            STAGE_FOLDER_KEY: dg.MetadataValue.path(store.root.parent.name)}


@contextmanager
def write_errors_reported() -> Iterator[None]:
    """A failed atomic write (full disk, read-only folder) fails the step with its own words:
    which file, why, and that the previous file was left intact."""
    try:
        yield
    except OutputWriteError as err:
        raise dg.Failure(description=str(err), metadata={"errno": err.errno or -1}) from err
