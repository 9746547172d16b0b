"""The one ``Definitions`` of the saturated-dag code location.

The active profile comes from ``SATURATED_DAG_PROFILE`` (``demo`` by default; ``paper`` or a
path to a YAML file) and is validated here, so a bad profile fails at load time, before any
model is touched. Outputs go under ``SATURATED_DAG_OUTPUT_DIR`` (default ``outputs``).
"""

from __future__ import annotations

import os

import dagster as dg

from assets import ALL_ASSET_CHECKS, ALL_ASSETS, experiment_assets
from jobs import demo_job, generation_jobs, pretrain_base_model
from resources import ExperimentResource, GenerationResource, JudgeResource, ParquetIOManager
from saturated_dag.config import load_profile

PROFILE = os.environ.get("SATURATED_DAG_PROFILE", "demo")
OUTPUT_DIR = os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs")

_profile = load_profile(PROFILE)

defs = dg.Definitions(
    assets=[*ALL_ASSETS, *experiment_assets(_profile)],
    asset_checks=ALL_ASSET_CHECKS,
    jobs=[demo_job(_profile), *generation_jobs, pretrain_base_model],
    resources={
        "experiment": ExperimentResource(profile=PROFILE, output_dir=OUTPUT_DIR),
        "policy": GenerationResource.from_settings(_profile.policy, seed=_profile.sampling.seed),
        "strong_judge": JudgeResource.from_settings(_profile.judges.strong,
                                                    seed=_profile.sampling.seed),
        "parquet_io": ParquetIOManager(base_dir=os.path.join(OUTPUT_DIR, "assets")),
    },
)
