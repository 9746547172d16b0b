"""The documented PostgreSQL instance (deploy/postgres/dagster.yaml) against a real server.

A throwaway cluster from Debian's postgresql package is started on 127.0.0.1 by
scripts/start_postgres.sh; a real asset is materialised through the CLI with DAGSTER_HOME holding
the documented config, and the run and its materialisation are read back from PostgreSQL, both
through Dagster and with plain SQL. Skipped, with the reason, where no server can start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DAGSTER = str(Path(sys.executable).parent / "dagster")
CONFIG = REPO_ROOT / "deploy" / "postgres" / "dagster.yaml"
PG_VARS = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD",
           "DAGSTER_PG_DB")


def _stop(env: dict[str, str]) -> None:
    pg_ctl = [f"{env['DAGSTER_PG_BIN']}/pg_ctl", "-D", env["DAGSTER_PG_DATA"], "-m", "fast",
              "-w", "stop"]
    if os.geteuid() == 0:
        pg_ctl = ["runuser", "-u", "postgres", "--", *pg_ctl]
    subprocess.run(pg_ctl, capture_output=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A running server and its DAGSTER_PG_* variables; stopped and deleted afterwards."""
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed "
                        "(pip install -e '.[deploy]')")
    # Not under pytest's tmp dir: as root the server runs as `postgres`, which must reach it.
    workdir = tempfile.mkdtemp(prefix="dagster-pg-test.")
    out = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "start_postgres.sh"), workdir],
                         capture_output=True, text=True, timeout=180, check=False)
    if out.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip(f"no PostgreSQL server could start here: {out.stderr.strip()[-500:]}")
    env = dict(line.removeprefix("export ").split("=", 1)
               for line in out.stdout.splitlines() if line.startswith("export "))
    try:
        yield env
    finally:
        _stop(env)
        shutil.rmtree(workdir, ignore_errors=True)


def test_documented_postgres_instance_records_runs(postgres: dict[str, str],
                                                   tmp_path: Path) -> None:
    import dagster as dg
    import psycopg2
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(CONFIG, home / "dagster.yaml")
    env = {**os.environ, **{k: postgres[k] for k in PG_VARS}, "DAGSTER_HOME": str(home),
           "SATURATED_DAG_PROFILE": "ci", "SATURATED_DAG_OUTPUT_DIR": str(tmp_path / "outputs")}
    out = subprocess.run([DAGSTER, "asset", "materialize", "-f", "definitions.py",
                          "--select", "base_model"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    # Nothing fell back to SQLite files under DAGSTER_HOME.
    assert not list(home.rglob("*.db")), sorted(map(str, home.rglob("*.db")))

    saved = {k: os.environ.get(k) for k in PG_VARS}
    os.environ.update({k: postgres[k] for k in PG_VARS})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert isinstance(instance.run_storage, PostgresRunStorage)
            assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
            runs = instance.get_runs()
            assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS
            observed = instance.fetch_observations(dg.AssetKey("base_model"), limit=1)
            assert observed.records and observed.records[0].run_id == runs[0].run_id
            pools = instance.event_log_storage.get_pool_config()
            assert pools.default_pool_limit == 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    with psycopg2.connect(host=postgres["DAGSTER_PG_HOST"], port=int(postgres["DAGSTER_PG_PORT"]),
                          user=postgres["DAGSTER_PG_USER"],
                          password=postgres["DAGSTER_PG_PASSWORD"],
                          dbname=postgres["DAGSTER_PG_DB"]) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_id, status FROM runs")
        assert cur.fetchall() == [(runs[0].run_id, "SUCCESS")]
        cur.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = "
                    "'ASSET_OBSERVATION' AND asset_key = %s",
                    (dg.AssetKey("base_model").to_string(),))
        assert cur.fetchone() == (1,)
