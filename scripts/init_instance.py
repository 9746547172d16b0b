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
GPU_POOL = "gpu"
sys.path.insert(0, str(ROOT))  # saturated_dag, when run as a script


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
            set_model_step_pool(instance)


def set_model_step_pool(instance) -> int:
    """Give the ``gpu`` pool, which every model step claims, a slot per model step the
    profile's layout runs at once (``saturated_dag.infra.parallel.step_layout``: one, one per core
    with ``execution.model_steps: one_per_core``, or one per CUDA device), for the profile
    in ``SATURATED_DAG_PROFILE`` (demo by default). Set on every call, so the pool follows
    the machine and the profile the instance is used with."""
    from saturated_dag.infra.parallel import step_layout
    from saturated_dag.profiles import load_profile

    slots = step_layout(load_profile(os.environ.get("SATURATED_DAG_PROFILE", "demo"))).steps
    instance.event_log_storage.set_concurrency_slots(GPU_POOL, slots)
    return slots

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: init_instance.py DAGSTER_HOME")
    init_instance(Path(sys.argv[1]).resolve())
