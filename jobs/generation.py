"""``<task>_generation``: the generation pool and its difficulty partitions for one task.

They run on the profile's ``step_executor`` (``jobs/executor.py``).
"""

import dagster as dg

from assets._keys import located
from jobs.executor import step_executor
from jobs.staged import RunTagsFor, asset_job, no_run_tags
from saturated_dag.config import Profile


def _generation_job(task: str, profile: Profile, run_tags_for: RunTagsFor):
    return asset_job(
        f"{task}_generation",
        dg.AssetSelection.assets(*[located(profile, key) for key in (
            "base_model", [task, "generation_pool"], [task, "difficulty_partitions"])]),
        run_tags_for=run_tags_for,
        executor_def=step_executor(profile),
        description=f"Sample the {task} generation pool and split it by difficulty.",
    )


def generation_jobs(profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    """One generation job per task of the profile (no job for a task it does not run)."""
    return [_generation_job(task, profile, run_tags_for) for task in profile.tasks]
