"""The one ``Definitions`` of the saturated-dag code location.

The active profile comes from ``SATURATED_DAG_PROFILE`` (``demo`` by default; ``paper``, ``ci``
or a path to a YAML file) and is validated here, so a bad profile fails at load time, before any
model is touched. Outputs go under ``SATURATED_DAG_OUTPUT_DIR`` (default ``outputs``).

Every job, including the implicit one behind a UI materialisation or a sensor's run, uses the
profile's ``step_executor`` (``jobs/executor.py``): the run's own process, so a run loads the
policy once for all its steps, unless a CPU profile asks for one model step per core
(``execution.model_steps: one_per_core``).
"""

from __future__ import annotations

import os

import dagster as dg

from assets import profile_assets
from assets.automation import automation_sensors
from jobs import (
    demo_job,
    eval_targets,
    generation_jobs,
    nightly_evaluation_job,
    nightly_evaluation_schedule,
    paper_jobs,
    pretrain_base_model,
    study_job,
    testbed_jobs,
)
from jobs.executor import step_executor
from resources import make_resources
from saturated_dag.config import load_profile
from saturated_dag.scorers.judge_context import check_local_policy

PROFILE = os.environ.get("SATURATED_DAG_PROFILE", "demo")
OUTPUT_DIR = os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs")

_profile = load_profile(PROFILE)
check_local_policy(_profile)  # prompts that cannot fit the model's context fail here, by cell
_assets, _checks = profile_assets(_profile)
_evals = eval_targets(_profile)
_nightly = nightly_evaluation_job([target.key for target in _evals], _profile)

defs = dg.Definitions(
    assets=_assets,
    asset_checks=_checks,
    jobs=[demo_job(_profile), study_job(_profile), *paper_jobs(_profile),
          *generation_jobs(_profile), *testbed_jobs(_profile), _nightly, pretrain_base_model],
    schedules=[nightly_evaluation_schedule(_nightly, _evals)],
    sensors=automation_sensors(_assets),
    resources=make_resources(PROFILE, OUTPUT_DIR),
    executor=step_executor(_profile),
)
