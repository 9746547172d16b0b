"""``demo``: the whole pipeline on the active profile's tasks (the embedded default by default).

Pool, partitions, scores, datasets, adapters, eval reports and result tables.
"""

from jobs.executor import step_executor
from jobs.staged import RunTagsFor, no_run_tags, staged_jobs
from saturated_dag.config import Profile


def whole_profile_job(name: str, profile: Profile, description: str,
                      tags: dict[str, str] | None = None,
                      run_tags_for: RunTagsFor = no_run_tags) -> list:
    """The parts (``jobs/staged.py``) of a job of every asset of the profile's tasks (and the
    base model), on the profile's ``step_executor``: ``demo`` and ``study`` differ only in
    name and tags."""
    return staged_jobs(name, profile, profile.tasks, executor_def=step_executor(profile),
                       description=description, tags=tags, run_tags_for=run_tags_for)


def demo_job(profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    return whole_profile_job(
        "demo", profile,
        f"Every asset of the tasks of profile {profile.name!r} ({', '.join(profile.tasks)}): "
        "in one process so the policy model loads once (execution.model_steps: one_per_core "
        "runs a model step per core on CPU).", run_tags_for=run_tags_for)
