"""Create and initialise a Dagster instance folder once, before any run uses it.

    .venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"

Why: two runs started at once on a fresh ``DAGSTER_HOME`` both create the SQLite tables, and
one dies with ``sqlite3.OperationalError: table ... already exists``. Every script of this
project that starts runs calls this first: it copies ``dagster.yaml`` there (unless one is
there already) and opens each storage under an exclusive file lock, so the tables exist before
any run starts, whoever calls it first. Safe to call again and from several processes at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def init_instance(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".init.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one initialiser at a time; the rest find it done
        config = home / "dagster.yaml"
        if not config.is_file():
            shutil.copyfile(ROOT / "dagster.yaml", config)
        os.environ["DAGSTER_HOME"] = str(home)
        import dagster as dg

        with dg.DagsterInstance.get() as instance:  # creates and stamps every storage
            instance.get_runs(limit=1)  # runs.db
            instance.all_instigator_state()  # schedules.db
            instance.fetch_materializations(dg.AssetKey("_init"), limit=1)  # the event index


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: init_instance.py DAGSTER_HOME")
    init_instance(Path(sys.argv[1]).resolve())
