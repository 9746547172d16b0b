"""``base_model``: the policy model every task samples from, as an observable source asset.

Dagster does not build the model (the ``pretrain_base_model`` job or the hub does); it observes
it. The observation's data version is the model's fingerprint, the same string the stage
caches key on (``saturated_dag.generation.models.model_fingerprint``: a hash of the model's
files, or of the hub id), so a retrained or swapped model marks every generation pool
downstream stale and re-observing an unchanged model marks nothing. Any asset job that selects
``base_model`` observes it as a step before the pools run; the UI's "Observe sources" does it
on its own.
"""

import json
from pathlib import Path

import dagster as dg

from resources.experiment import ExperimentResource
from saturated_dag.generation.models import check_model_folder, model_fingerprint, resolve

SPEC = dg.AssetSpec(
    "base_model",
    group_name="model",
    kinds={"pytorch"},
    description="The policy model of the profile (demo: the embedded arithmetic model; paper: "
    "Qwen3-1.7B-Base). Observed, not built: its data version is a hash of its files (a hub "
    "id: of the id).",
)


def observe_model(model: str, backend: str) -> dg.ObserveResult:
    """The model's fingerprint as data version, and what it is as metadata. A folder that
    cannot load (no weights, config or tokenizer) is refused, naming the missing file, so a
    broken folder never becomes a new data version that marks the pools stale."""
    source = resolve(model)
    if source.kind == "folder":
        check_model_folder(source.location, model)
    metadata: dict[str, object] = {"model": model, "kind": source.kind,
                                   "location": source.location, "backend": backend}
    if source.kind != "hub":
        location = Path(source.location)
        provenance = (location if location.is_dir() else location.parent) / "PROVENANCE.json"
        if provenance.is_file():
            record = json.loads(provenance.read_text())
            metadata.update({
                "pretraining_steps": record.get("steps"),
                "pretraining_wall_time_s": record.get("wall_time_s"),
                "parameters": record.get("parameters"),
                "recipe_commit": str(record.get("git_commit")),
            })
    version = model_fingerprint(model)
    metadata["fingerprint"] = version
    return dg.ObserveResult(data_version=dg.DataVersion(version), metadata=metadata)


@dg.multi_observable_source_asset(specs=[SPEC], name="base_model")
def base_model(context: dg.AssetExecutionContext,
               experiment: ExperimentResource) -> dg.ObserveResult:
    # the profile's own policy (with the run's overrides): the model the pools load
    policy = experiment.settings.policy
    result = observe_model(policy.model, policy.backend)
    context.log.info(f"base model {policy.model} version {result.data_version.value}")
    return result
