"""``python -m run_parts <job>``: execute a whole-task job (``demo``, ``study``,
``paper_<task>``) part after part, in one process (``jobs/staged.py``).

Beside ``definitions.py``, not under ``jobs/``: it loads the code location, which nothing in
the Dagster layer may import (``[tool.importlinter]`` in ``pyproject.toml``).

Each part is the same run that ``dg launch --job <part>`` (``dagster job execute -f
definitions.py -j <part>``) makes: Dagster's ``execute_job`` on the instance of
``DAGSTER_HOME``, with the job's own executor, so every run, its events and its
materialisations appear in the UI as before. What differs
is that the code location is loaded once: each ``dagster job execute`` imports torch,
transformers and Dagster and builds the asset graph again (about 7 s on the demo, measured
with ``time python -c 'import definitions'``), and listing the parts costs one more load.
The run scripts (``scripts/run_demo.sh``, ``scripts/run_study.sh``) call this;
``scripts/ci_job.sh`` keeps the ``dagster job execute`` loop, so CI still runs the command a
researcher types.

A part that fails stops the sequence (the later parts read its assets) and the command exits
1, naming the run to open in the UI; the parts already finished keep their materialisations.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dagster as dg

RECONSTRUCTOR = (__spec__.name if __spec__ is not None else __name__, "part_job")
"""Where a run of a part finds its job again (this module's ``part_job``): by its module
name even when this file runs as ``__main__``, so a step process can rebuild the job."""

ROOT = str(Path(__file__).resolve().parent)
"""The folder this module and ``definitions.py`` are imported from (the runs' working
directory: Dagster drops the script's own folder from ``sys.path`` while it imports)."""


def part_job(name: str) -> dg.JobDefinition:
    """The job ``name`` of the code location (``definitions.py``), for its runs' origin."""
    import definitions

    return definitions.defs.resolve_job_def(name)


def run_parts(parts: list[str], instance: dg.DagsterInstance,
              reconstructor: tuple[str, str] = RECONSTRUCTOR) -> int:
    """Execute ``parts`` in order on ``instance``, each job built by ``reconstructor``
    (module, function) from its name; 0 when every run succeeded, else 1."""
    for index, part in enumerate(parts, start=1):
        print(f"part {index} of {len(parts)}: {part}", file=sys.stderr, flush=True)
        started = time.monotonic()
        job = dg.build_reconstructable_job(*reconstructor, reconstructable_args=(part,),
                                           reconstructor_working_directory=ROOT)
        with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
            if not result.success:
                print(f"run {result.run_id} of {part} failed: the parts after it were not "
                      "run (open the run in the UI, fix the cause, and run this command "
                      "again: finished stages and adapters come from their caches)",
                      file=sys.stderr)
                return 1
            print(f"part {index} of {len(parts)}: {part} succeeded in "
                  f"{time.monotonic() - started:.1f} s (run {result.run_id})",
                  file=sys.stderr, flush=True)
    return 0


def main(argv: list[str]) -> int:
    """Execute the parts of a whole-task job of the loaded profile (``SATURATED_DAG_PROFILE``)
    on the instance of ``DAGSTER_HOME``."""
    from jobs.parts import parts_of_argv

    parts = parts_of_argv(argv, __doc__)
    if parts is None:
        return 2
    with dg.DagsterInstance.get() as instance:
        return run_parts(parts, instance)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
