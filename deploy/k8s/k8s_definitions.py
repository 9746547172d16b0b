"""The code location on Kubernetes: the repository's Definitions plus what a cluster needs.

Served by the user-code deployment (deploy/k8s/values.yaml) with
``dagster api grpc -f deploy/k8s/k8s_definitions.py -d <repository root>``. It calls the same
``jobs.location.build_defs`` as ``definitions.py`` with what a cluster changes, so a new asset
or job is covered without touching this file:

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

from jobs.location import build_defs, location_from_environment

HERE = Path(__file__).resolve().parent
K8S_CONFIG_TAG = "dagster-k8s/config"
GPU_K8S_CONFIG: dict[str, Any] = yaml.safe_load((HERE / "gpu_k8s_config.yaml").read_text())
EXECUTOR_CONFIG: dict[str, Any] = yaml.safe_load((HERE / "executor.yaml").read_text())


def executor_config(gpu: dict[str, set[dg.AssetKey]]) -> dict[str, Any]:
    """executor.yaml with the GPU settings for each GPU step (``gpu``: op name -> its asset
    keys, ``jobs.location.gpu_ops``)."""
    return {**EXECUTOR_CONFIG,
            "per_step_k8s_config": {op: GPU_K8S_CONFIG for op in sorted(gpu)}}


def gpu_aware_executor(gpu: dict[str, set[dg.AssetKey]]) -> dg.ExecutorDefinition:
    """``k8s_job_executor``, one pod per step, the GPU steps' pods with a GPU."""
    return k8s_job_executor.configured(executor_config(gpu), name="k8s_gpu_aware")


PROFILE, OUTPUT_DIR = location_from_environment()
defs = build_defs(PROFILE, OUTPUT_DIR, executor=gpu_aware_executor,
                  gpu_run_tags={K8S_CONFIG_TAG: json.dumps(GPU_K8S_CONFIG)})
