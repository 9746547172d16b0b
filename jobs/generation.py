"""``<task>_generation``: the generation pool and its difficulty partitions for one task.

They run in one process (the in-process executor), so the policy model loads once per run.
"""

import dagster as dg

from saturated_dag.config import Profile


def _generation_job(task: str):
    return dg.define_asset_job(
        name=f"{task}_generation",
        selection=dg.AssetSelection.assets(
            "base_model", [task, "generation_pool"], [task, "difficulty_partitions"]
        ),
        executor_def=dg.in_process_executor,
        description=f"Sample the {task} generation pool and split it by difficulty.",
    )


def generation_jobs(profile: Profile) -> list:
    """One generation job per task of the profile (no job for a task it does not run)."""
    return [_generation_job(task) for task in profile.tasks]
