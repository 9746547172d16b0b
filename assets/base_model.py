"""``base_model``: the policy model every task samples from, as a versioned source asset.

Its data version is a hash of the model's files (or the hub id), so a retrained or swapped
model marks every generation pool downstream stale.
"""

import hashlib
import json
from pathlib import Path

import dagster as dg

from resources import GenerationResource
from saturated_dag.generation.models import resolve
from saturated_dag.shards import file_fingerprint

CODE_VERSION = "1"


@dg.asset(
    key="base_model",
    group_name="model",
    code_version=CODE_VERSION,
    kinds={"pytorch"},
    description="The policy model (demo: the embedded arithmetic model; paper: "
    "Qwen3-1.7B-Base). Its version is a hash of its files.",
)
def base_model(
    context: dg.AssetExecutionContext, policy: GenerationResource
) -> dg.MaterializeResult:
    settings = policy.settings()
    source = resolve(settings.model)
    metadata: dict[str, object] = {"model": settings.model, "kind": source.kind,
                                   "location": source.location, "backend": settings.backend}
    if source.kind == "hub":
        version = hashlib.sha256(settings.model.encode()).hexdigest()[:16]
    else:
        location = Path(source.location)
        version = file_fingerprint(location)  # the same hash the stage cache keys use
        provenance = (location if location.is_dir() else location.parent) / "PROVENANCE.json"
        if provenance.is_file():
            record = json.loads(provenance.read_text())
            metadata.update({
                "pretraining_steps": record.get("steps"),
                "pretraining_wall_time_s": record.get("wall_time_s"),
                "parameters": record.get("parameters"),
                "recipe_commit": str(record.get("git_commit")),
            })
    context.log.info(f"base model {settings.model} ({source.kind}) version {version}")
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version))
