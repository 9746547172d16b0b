"""The one ``Definitions`` of the saturated-dag code location.

The active profile comes from ``SATURATED_DAG_PROFILE`` (``demo`` by default; ``paper``, ``ci``
or a path to a YAML file) and is validated here, so a bad profile fails at load time, before any
model is touched. Outputs go under ``SATURATED_DAG_OUTPUT_DIR`` (default ``outputs``).
"""

from __future__ import annotations

import os

import dagster as dg

from assets import ALL_ASSET_CHECKS, ALL_ASSETS, experiment_assets, experiment_checks
from assets.automation import automation_sensor, with_lineage
from jobs import (
    demo_job,
    eval_keys,
    generation_jobs,
    nightly_evaluation_job,
    nightly_evaluation_schedule,
    paper_jobs,
    pretrain_base_model,
)
from resources import ExperimentResource, GenerationResource, JudgeResource, ParquetIOManager
from saturated_dag.config import load_profile

PROFILE = os.environ.get("SATURATED_DAG_PROFILE", "demo")
OUTPUT_DIR = os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs")

_profile = load_profile(PROFILE)
_assets = with_lineage([*ALL_ASSETS, *experiment_assets(_profile)])
_evals = eval_keys(_assets)
_nightly = nightly_evaluation_job(_evals)

defs = dg.Definitions(
    assets=_assets,
    asset_checks=[*ALL_ASSET_CHECKS, *experiment_checks(_profile)],
    jobs=[demo_job(_profile), *paper_jobs(_profile), *generation_jobs, _nightly,
          pretrain_base_model],
    schedules=[nightly_evaluation_schedule(_nightly, _evals)],
    sensors=[automation_sensor],
    resources={
        "experiment": ExperimentResource(profile=PROFILE, output_dir=OUTPUT_DIR),
        "policy": GenerationResource.from_settings(_profile.policy, seed=_profile.sampling.seed),
        "strong_judge": JudgeResource.from_settings(_profile.judges.strong,
                                                    seed=_profile.sampling.seed),
        "parquet_io": ParquetIOManager(base_dir=os.path.join(OUTPUT_DIR, "assets")),
    },
)
