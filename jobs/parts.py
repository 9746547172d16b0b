"""``python -m jobs.parts <job>``: the parts of a whole-task job (``demo``, ``study``,
``paper_<task>``) on the loaded profile, one per line, in run order (``jobs/staged.py``).

``scripts/ci_job.sh`` loops over them with ``dagster job execute``; the run scripts execute
them in one process (``python -m run_parts``). A module of its own, which the ``jobs``
package does not import: run as ``-m``, a module the package had already imported would be
loaded twice (runpy's RuntimeWarning).
"""

from __future__ import annotations

import sys

from jobs.staged import part_names, whole_jobs


def job_parts(name: str) -> list[str] | str:
    """The parts of the whole-task job ``name`` (``demo``, ``study``, ``paper_<task>``) of the
    loaded profile (``SATURATED_DAG_PROFILE``), in run order; why not, when the profile does
    not run it."""
    from jobs.location import location_from_environment
    from saturated_dag.profiles import load_profile

    profile = load_profile(location_from_environment()[0])
    jobs = whole_jobs(profile)
    if name not in jobs:
        tasks = [name.removeprefix("paper_")] if name.startswith("paper_") else profile.tasks
        missing = [task for task in tasks if task not in profile.tasks]
        why = (f"does not run {missing}" if missing else
               f"has no job {name!r} (its location lists {', '.join(jobs)})")
        return f"{name}: profile {profile.name!r} {why}"
    return part_names(name, profile, jobs[name])


def parts_of_argv(argv: list[str], usage: str) -> list[str] | None:
    """The parts of the one job named in ``argv``; None, with ``usage`` or the reason on
    stderr, when ``argv`` names no job or the profile does not run it (both CLIs: this
    one and ``run_parts.py``)."""
    if len(argv) != 1:
        print(usage, file=sys.stderr)
        return None
    parts = job_parts(argv[0])
    if isinstance(parts, str):
        print(parts, file=sys.stderr)
        return None
    return parts


def main(argv: list[str]) -> int:
    """Print the parts of a whole-task job of the loaded profile, one per line, in run
    order."""
    parts = parts_of_argv(argv, __doc__)
    if parts is None:
        return 2
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
