"""The code location on Kubernetes: the repository's Definitions plus what a cluster needs.

Served by the user-code deployment (deploy/k8s/values.yaml) with
``dagster api grpc -f deploy/k8s/k8s_definitions.py -d <repository root>``. Nothing is redefined
by hand, so a new asset or job is covered without touching this file:

- the default executor is ``k8s_job_executor`` (executor.yaml): assets materialised from the UI
  run one pod per step, and the steps of assets in pool ``gpu`` get gpu_k8s_config.yaml;
- the repository's asset jobs that include a GPU asset keep their executor (``demo`` keeps the
  policy model in one process) and carry gpu_k8s_config.yaml as their ``dagster-k8s/config`` run
  tag, so the run pod that does their work gets the GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster_k8s import k8s_job_executor

import definitions as repository  # the module, not its Definitions: one Definitions per file

HERE = Path(__file__).resolve().parent
K8S_CONFIG_TAG = "dagster-k8s/config"
GPU_POOL = "gpu"
GPU_K8S_CONFIG: dict[str, Any] = yaml.safe_load((HERE / "gpu_k8s_config.yaml").read_text())
EXECUTOR_CONFIG: dict[str, Any] = yaml.safe_load((HERE / "executor.yaml").read_text())


def gpu_assets(defs: dg.Definitions) -> dict[str, set[dg.AssetKey]]:
    """Op name -> asset keys of every executable asset whose op is in the GPU pool."""
    found: dict[str, set[dg.AssetKey]] = {}
    for item in defs.assets or []:
        if isinstance(item, dg.AssetsDefinition) and item.is_executable:
            if getattr(item.node_def, "pool", None) == GPU_POOL:
                found[item.node_def.name] = set(item.keys)
    return found


def executor_config(defs: dg.Definitions) -> dict[str, Any]:
    """executor.yaml with the GPU settings for each GPU step."""
    return {**EXECUTOR_CONFIG,
            "per_step_k8s_config": {op: GPU_K8S_CONFIG for op in sorted(gpu_assets(defs))}}


def _with_gpu_run_tag(job: Any, gpu_keys: set[dg.AssetKey], graph: Any) -> Any:
    selection = getattr(job, "selection", None)
    if selection is None or not selection.resolve(graph) & gpu_keys:
        return job  # an op job, or one without GPU assets: unchanged
    run_tags = dict(job.run_tags if job.run_tags is not None else job.tags or {})
    run_tags[K8S_CONFIG_TAG] = json.dumps(GPU_K8S_CONFIG)
    return dg.define_asset_job(
        name=job.name, selection=selection, config=job.config, description=job.description,
        tags=job.tags, run_tags=run_tags, metadata=job.metadata,
        partitions_def=job.partitions_def, executor_def=job.executor_def, hooks=job.hooks,
        op_retry_policy=job.op_retry_policy)


def _retarget(item: Any, jobs: dict[str, Any]) -> Any:
    """A schedule or sensor pointed at the re-tagged jobs (Dagster refuses two of one name)."""
    if isinstance(item, dg.ScheduleDefinition) and item.has_job and item.job.name in jobs:
        return item.with_updated_job(jobs[item.job.name])
    if isinstance(item, dg.SensorDefinition) and item.has_jobs:
        targets = [jobs.get(job.name, job) for job in item.jobs]
        if any(new is not old for new, old in zip(targets, item.jobs, strict=True)):
            return item.with_updated_jobs(targets)
    return item


def for_kubernetes(defs: dg.Definitions) -> dg.Definitions:
    """The repository's Definitions on a cluster. Its default executor (in-process, so a
    local run loads the policy once) is replaced by the GPU-aware ``k8s_job_executor``; the
    named jobs keep their own executors."""
    gpu_keys = set().union(*gpu_assets(defs).values())
    graph = defs.resolve_asset_graph()
    jobs = {job.name: _with_gpu_run_tag(job, gpu_keys, graph) for job in defs.jobs or []}
    return dg.Definitions(
        assets=defs.assets, asset_checks=defs.asset_checks, resources=defs.resources,
        schedules=[_retarget(s, jobs) for s in defs.schedules or []],
        sensors=[_retarget(s, jobs) for s in defs.sensors or []],
        loggers=defs.loggers, metadata=defs.metadata, jobs=list(jobs.values()),
        executor=k8s_job_executor.configured(executor_config(defs), name="k8s_gpu_aware"),
    )


defs = for_kubernetes(repository.defs)
