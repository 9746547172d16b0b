"""Exit non-zero unless the newest run of each named job succeeded with every asset check
passed (``scripts/ci_job.sh``, ``scripts/rehearsal_job.sh``; reads ``$DAGSTER_HOME``).

    python scripts/check_runs.py JOB [JOB ...]
"""

from __future__ import annotations

import sys

import dagster as dg


def check(instance: dg.DagsterInstance, job: str) -> list[str]:
    """The problems of ``job``'s newest run (empty: it succeeded and every check passed)."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=1)
    if not runs:
        return [f"{job}: no run found"]
    run = runs[0]
    if run.status != dg.DagsterRunStatus.SUCCESS:
        return [f"{job}: run {run.run_id} ended {run.status.value}"]
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    checks = [r.event_log_entry.dagster_event.event_specific_data for r in records]
    failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks if not c.passed]
    print(f"{job}: run {run.run_id} {run.status.value}, {len(checks)} asset checks, "
          f"{len(failed)} failed")
    if not checks:
        return [f"{job}: no asset check ran"]
    return [f"{job}: check failed: {name}" for name in failed]


def main(jobs: list[str]) -> int:
    if not jobs:
        print(__doc__)
        return 2
    problems = [p for job in jobs for p in check(dg.DagsterInstance.get(), job)]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
