"""Lineage: derived code versions, and automation that cannot burn a GPU-week by accident.

``with_lineage`` gives every asset its code version (``assets/versioning.py``: a hash of the
source it imports) and one of two automation conditions, by where the asset runs (docs/jobs.md):

- CPU assets (every asset without ``pool="gpu"``) are cheap, so they run when missing, when an
  upstream asset was updated, or when their own code version changed. They wait while an
  upstream asset is missing or running, while they run themselves, and while a blocking check
  of an upstream asset has not passed on its latest materialisation.
- GPU assets (``pool="gpu"``: pools, judges, entropy scores, adapters, eval reports) run by
  themselves only when missing or when an upstream *data version* changed (a cache hit changes
  nothing), with the same waits; their own code version starts nothing unless the profile opts
  in (``automation.gpu_on_code_change``). An update by a run that also ran the asset does not
  count, and they wait until every upstream asset has caught up with its own inputs, so a new
  pool is scored once, after the CPU sensor has re-split it.

"Missing" is requested once (on the sensor's first tick or when it becomes missing), so a
failing run is not retried tick after tick. Two sensors carry the conditions: ``automation_cpu``
(running by default) and ``automation_gpu`` (stopped by default), so a code-location reload
never starts GPU work by itself; switching ``automation_gpu`` on is the deliberate step.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.versioning import SourceTree, with_code_versions
from saturated_dag.config import AutomationSettings, Profile

AC = dg.AutomationCondition
GPU_POOL = "gpu"
COMPUTE_TAG = "saturated_dag/compute"
"""Asset tag ``cpu`` or ``gpu``: what the asset needs under the location's profile (filter on it
in the UI). ``gpu`` only for a model step (under the gpu concurrency limit) of a profile whose
models run on an accelerator; the embedded default's model steps run on the cores and say
``cpu``. Which sensor automates an asset follows the concurrency limit
(``automation_sensors``)."""


def is_gpu(assets_def: dg.AssetsDefinition) -> bool:
    """A GPU asset is one whose op runs under the gpu concurrency limit (Dagster's pool
    ``gpu``: one at a time per slot)."""
    return assets_def.op.pool == GPU_POOL


def _guarded(trigger: dg.AutomationCondition, label: str,
             *extra_waits: dg.AutomationCondition) -> dg.AutomationCondition:
    """``trigger`` (remembered until handled), or missing when first evaluated, and every
    wait both sensors share.

    ``eager()`` alone requests an asset that *becomes* missing, not one that already is when
    the condition is first evaluated (a new asset, the sensor's first tick): the second term
    fills those once, and once only, so a run that fails is not retried tick after tick.
    """
    condition = (
        AC.in_latest_time_window()
        & (trigger.since_last_handled()
           | (AC.missing() & AC.initial_evaluation()).with_label("missing_at_first_evaluation"))
        & ~AC.any_deps_missing()
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
        & AC.all_deps_blocking_checks_passed()
    )
    for wait in extra_waits:
        condition = condition & ~wait
    return condition.with_label(label)


def cpu_condition() -> dg.AutomationCondition:
    """Missing, upstream updated, or own code changed; upstream blocking checks passed."""
    trigger = AC.newly_missing() | AC.any_deps_updated() | AC.code_version_changed()
    return _guarded(trigger, "cpu: missing, upstream updated or code changed")


def upstream_data_changed() -> dg.AutomationCondition:
    """An upstream asset's data version changed since the last tick, in a run that did not
    also run this asset."""
    return AC.any_deps_match(
        (AC.data_version_changed() & ~AC.executed_with_root_target())
        .with_label("data_version_changed_without_this_asset")
    ).with_label("upstream_data_changed")


def any_deps_outdated() -> dg.AutomationCondition:
    """Some upstream asset has not caught up: one of *its* upstream assets changed data since
    it was last updated (partitions after a new pool, before they are re-split)."""
    return AC.any_deps_match(
        AC.any_deps_match(AC.data_version_changed()).since(AC.newly_updated())
        .with_label("outdated")
    ).with_label("any_deps_outdated")


def gpu_condition(on_code_change: bool = False) -> dg.AutomationCondition:
    """Missing or upstream data changed (plus own code changed, only when opted in), once
    every upstream asset has caught up with its own inputs.

    The last wait is what keeps one new pool from costing two scoring runs: scores read the
    pool and its partitions; without it the GPU sensor would score the new pool against the
    old partitions, and again when the CPU sensor has re-split them.
    """
    trigger = AC.newly_missing() | upstream_data_changed()
    label = "gpu: missing or upstream data changed"
    if on_code_change:
        trigger = trigger | AC.code_version_changed()
        label = "gpu: missing, upstream data changed or code changed"
    return _guarded(trigger, label, any_deps_outdated())


def with_automation(assets: Sequence[dg.AssetsDefinition], settings: AutomationSettings,
                    accelerated: bool = True) -> list[dg.AssetsDefinition]:
    """Each materialisable asset with its condition and its ``saturated_dag/compute`` tag
    (``accelerated``: the profile's models run on an accelerator); observable sources
    (``base_model``) are left as they are: observing is not automated."""
    out: list[dg.AssetsDefinition] = []
    for a in assets:
        if not a.is_materializable:
            out.append(a)
            continue
        gpu = is_gpu(a)
        condition = gpu_condition(settings.gpu_on_code_change) if gpu else cpu_condition()
        tags = {COMPUTE_TAG: "gpu" if gpu and accelerated else "cpu"}
        out.append(a.map_asset_specs(
            lambda spec, c=condition, t=tags: spec.replace_attributes(automation_condition=c)
            .merge_attributes(tags=t)))
    return out


def with_lineage(assets: Sequence[dg.AssetsDefinition], profile: Profile,
                 tree: SourceTree | None = None) -> list[dg.AssetsDefinition]:
    """Derived code versions and the profile's automation on every asset (the one entry point:
    definitions, tests and benchmarks all build the graph through it)."""
    from saturated_dag.infra.parallel import on_cpu

    return with_automation(with_code_versions(assets, tree), profile.automation,
                           accelerated=not on_cpu(profile))


def automation_sensors(assets: Sequence[dg.AssetsDefinition]
                       ) -> list[dg.AutomationConditionSensorDefinition]:
    """``automation_cpu`` (running) over the CPU assets, ``automation_gpu`` (stopped) over the
    GPU assets of ``assets``; each asset is evaluated by exactly one of them."""
    materializable = [a for a in assets if a.is_materializable]
    cpu = [k for a in materializable if not is_gpu(a) for k in a.keys]
    gpu = [k for a in materializable if is_gpu(a) for k in a.keys]
    return [
        dg.AutomationConditionSensorDefinition(
            "automation_cpu",
            target=dg.AssetSelection.assets(*cpu),
            default_status=dg.DefaultSensorStatus.RUNNING,
            minimum_interval_seconds=60,
            run_tags={"saturated_dag/automation": "cpu"},
            description="CPU assets (partitions, agreement, datasets, tables): re-run when "
            "missing, when an upstream asset was updated or when their code changed, once "
            "every blocking check upstream has passed. Never starts a GPU asset.",
        ),
        dg.AutomationConditionSensorDefinition(
            "automation_gpu",
            target=dg.AssetSelection.assets(*gpu),
            default_status=dg.DefaultSensorStatus.STOPPED,
            minimum_interval_seconds=60,
            run_tags={"saturated_dag/automation": "gpu"},
            description="GPU assets (pools, judges, entropy, adapters, eval reports): run when "
            "missing or when upstream data changed, never on a code change (unless the "
            "profile sets automation.gpu_on_code_change) and never while a run of them is in "
            "progress. Stopped by default so that loading or reloading the code location "
            "never starts GPU work by itself: turn it on deliberately.",
        ),
    ]
