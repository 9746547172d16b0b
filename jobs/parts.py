"""``python -m jobs.parts <job>``: the parts of a whole-task job (``demo``, ``study``,
``paper_<task>``) on the loaded profile, one per line, in run order (``jobs/staged.py``).

The run scripts loop over them (``scripts/run_demo.sh``). A module of its own, which the
``jobs`` package does not import: run as ``-m``, a module the package had already imported
would be loaded twice (runpy's RuntimeWarning).
"""

from __future__ import annotations

import sys

from jobs.staged import part_names


def main(argv: list[str]) -> int:
    """Print the parts of a whole-task job (``demo``, ``study``, ``paper_<task>``) of the
    loaded profile (``SATURATED_DAG_PROFILE``), one per line, in run order."""
    from jobs.location import location_from_environment
    from saturated_dag.config import load_profile

    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    profile = load_profile(location_from_environment()[0])
    name = argv[0]
    tasks = ([name.removeprefix("paper_")] if name.startswith("paper_") else profile.tasks)
    if any(task not in profile.tasks for task in tasks):
        print(f"{name}: profile {profile.name!r} does not run {tasks}", file=sys.stderr)
        return 2
    print("\n".join(part_names(name, profile, tasks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
