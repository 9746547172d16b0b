"""Runs started at once on a fresh ``DAGSTER_HOME``: one used to die with
``sqlite3.OperationalError: table ... already exists`` (both created the SQLite tables). The
project's scripts initialise the instance first (``scripts/init_instance.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT as ROOT

OPEN = ("import dagster as dg\n"
        "with dg.DagsterInstance.get() as i:\n"
        "    i.get_runs(limit=1); i.all_instigator_state()\n"
        "    i.fetch_materializations(dg.AssetKey('x'), limit=1)\n")


def _open_at_once(home: Path, count: int) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    started = [subprocess.Popen([sys.executable, "-c", OPEN], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(count)]
    return [subprocess.CompletedProcess(p.args, p.wait(120), *p.communicate())
            for p in started]


def test_an_initialised_home_takes_runs_started_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # the scripts' first step, twice at once: the lock makes one of them do the work
    both = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "init_instance.py"),
                              str(home)]) for _ in range(2)]
    assert [p.wait(120) for p in both] == [0, 0]
    assert (home / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    done = _open_at_once(home, 4)
    assert all(d.returncode == 0 for d in done), [d.stderr[-400:] for d in done]
    assert not any("already exists" in d.stderr for d in done)


def test_every_script_that_starts_runs_initialises_the_instance_first() -> None:
    for script in ("run_demo.sh", "run_study.sh", "ci_job.sh", "rehearsal_job.sh"):
        lines = [line for line in (ROOT / "scripts" / script).read_text().splitlines()
                 if not line.lstrip().startswith("#")]
        init = next(i for i, line in enumerate(lines) if "scripts/init_instance.py" in line)
        starts = [i for i, line in enumerate(lines)
                  if "job execute" in line or "run_parts" in line]
        assert starts and init < starts[0], script
