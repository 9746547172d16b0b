"""``paper_chain_sum`` and ``paper_gsm8k``: every asset of one task, as in the paper.

They run the loaded profile (``SATURATED_DAG_PROFILE=paper`` for the paper's models and
sizes): chain sum gives Tables 1, 7, 8, 9 and Figure 6; GSM8K Table 2 (and Table 3 with the
``paper_instruct`` profile). One process (``jobs/executor.py``), so the policy loads once for
sampling, judging, entropy and evaluation; training runs in its own subprocess
(``assets/adapters.py``).
"""

from jobs.executor import step_executor
from jobs.staged import RunTagsFor, no_run_tags, staged_jobs
from saturated_dag.config import Profile


def paper_job(task: str, profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    """The parts (``jobs/staged.py``) of the job of every asset of ``task``."""
    return staged_jobs(
        f"paper_{task}", profile, [task], executor_def=step_executor(profile),
        # no profile tag here: the run is tagged with the location's own profile (a name or a
        # YAML path) when it starts; the profile's name would clash with a path
        tags={"saturated_dag/task": task},
        description=f"Every {task} asset of profile {profile.name!r}: pool, partitions, scores, "
        "datasets, adapters, eval reports and tables.", run_tags_for=run_tags_for,
    )


def paper_jobs(profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    """One job per task of the profile (a task it does not run has no assets to select)."""
    return [job for task in profile.tasks for job in paper_job(task, profile, run_tags_for)]
