"""``build_defs``: the code location's ``Definitions``, one builder for every deployment.

``definitions.py`` (local: ``dagster dev``, ``dagster job execute``, ``dg``) and
``deploy/k8s/k8s_definitions.py`` (the Kubernetes user-code deployment) both call it; a
deployment passes what differs (the default executor, the run tags of jobs that need the
accelerator) instead of taking the local ``Definitions`` apart and rebuilding it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import dagster as dg

from assets import profile_assets
from assets.automation import automation_sensors
from jobs.demo import demo_job
from jobs.executor import step_executor
from jobs.generation import generation_jobs
from jobs.nightly import eval_targets, nightly_evaluation_job, nightly_evaluation_schedule
from jobs.paper import paper_jobs
from jobs.pretrain import pretrain_base_model
from jobs.staged import RunTagsFor, no_run_tags, whole_jobs
from jobs.study import study_job
from jobs.testbed import testbed_jobs
from resources import make_resources
from saturated_dag.profiles import load_profile
from saturated_dag.profiles.engine_context import check_local_policy

GPU_POOL = "gpu"


def location_from_environment() -> tuple[str, str]:
    """The profile (``SATURATED_DAG_PROFILE``: a name or a YAML path, ``demo`` by default)
    and the output folder (``SATURATED_DAG_OUTPUT_DIR``, ``outputs`` by default) every
    deployment of the code location reads."""
    return (os.environ.get("SATURATED_DAG_PROFILE", "demo"),
            os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs"))


def gpu_ops(assets: list) -> dict[str, set[dg.AssetKey]]:
    """Op name -> asset keys of every executable asset whose op is under the gpu
    concurrency limit (Dagster's pool ``gpu``)."""
    found: dict[str, set[dg.AssetKey]] = {}
    for item in assets:
        if isinstance(item, dg.AssetsDefinition) and item.is_executable:
            if getattr(item.node_def, "pool", None) == GPU_POOL:
                found[item.node_def.name] = set(item.keys)
    return found


def build_defs(profile_name: str, output_dir: str, *,
               executor: Callable[[dict[str, set[dg.AssetKey]]], dg.ExecutorDefinition]
               | None = None,
               gpu_run_tags: Mapping[str, str] | None = None,
               nightly_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING
               ) -> dg.Definitions:
    """The code location for the profile ``profile_name`` (a name or a YAML path), writing
    under ``output_dir``. The profile is validated here, so a bad one fails at load time,
    before any model is touched.

    ``executor``: the default executor, built from the gpu-limited ops (``gpu_ops``); the
    profile's ``step_executor`` when None (the run's own process, so a run loads the policy
    once). ``gpu_run_tags``: added to every asset job that includes a ``gpu`` asset (a
    cluster's run pod that does their work gets the accelerator); the named jobs keep their
    own executors either way. ``nightly_status``: the nightly schedule's status when the
    location first loads (the extra locations of ``workspace.yaml`` start it stopped).
    """
    profile = load_profile(profile_name)
    check_local_policy(profile)  # prompts that cannot fit the model's context fail here
    assets, checks = profile_assets(profile)
    gpu = gpu_ops(assets)
    evals = eval_targets(profile)
    resources = make_resources(profile_name, output_dir)
    run_tags_for: RunTagsFor = no_run_tags
    if gpu_run_tags:
        graph = dg.Definitions(assets=assets, asset_checks=checks,
                               resources=resources).resolve_asset_graph()
        gpu_keys = set().union(*gpu.values())

        def run_tags_for(selection: dg.AssetSelection) -> Mapping[str, str]:
            return dict(gpu_run_tags) if selection.resolve(graph) & gpu_keys else {}

    # every asset job gets its run tags where it is defined (``jobs.staged.asset_job``); the
    # location lists its own profile's whole-graph jobs only (``whole_jobs``)
    whole = whole_jobs(profile)
    jobs = [*(demo_job(profile, run_tags_for) if "demo" in whole else []),
            *(study_job(profile, run_tags_for) if "study" in whole else []),
            *(testbed_jobs(profile, run_tags_for) if whole.keys() & {
                "testbed", "dpo_recipe_search"} else []),
            *(paper_jobs(profile, run_tags_for) if any(
                name.startswith("paper_") for name in whole) else []),
            *generation_jobs(profile, run_tags_for),
            nightly_evaluation_job([target.key for target in evals], profile, run_tags_for),
            pretrain_base_model]
    nightly = next(job for job in jobs if job.name == "nightly_evaluation")
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        schedules=[nightly_evaluation_schedule(nightly, evals, status=nightly_status)],
        sensors=automation_sensors(assets),
        resources=resources,
        executor=executor(gpu) if executor is not None else step_executor(profile),
    )
