"""The UI started as README says stops within 10 s of one Ctrl-C.

README's commands, on a temporary ``DAGSTER_HOME``: ``python scripts/init_instance.py``, then
the command README names for the UI (``bash scripts/ui.sh``: ``dagster dev -w workspace.yaml``,
its webserver, daemon and three code locations), started the way an interactive terminal starts
a job: a session of its own and SIGINT/SIGTERM at their default dispositions (a shell that runs
a command in the background, without job control, would start it with both *ignored*). Once the
UI answers, one SIGINT goes to the process group, as Ctrl-C sends it, and every process of the
session (each started by the command, whatever its group) must be gone 10 s later. Three
moments: as soon as the UI answers; as the daemon starts its first automation tick (its thread
ends the tick over every location before it stops); and idle, once that tick has ended.
Each prints its stop time and whether ``scripts/ui.sh`` had to kill what was left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
STOP_WITHIN_S = 10.0
START_TIMEOUT_S = 600.0  # three code locations load torch and their graphs; slower under load
TICK_STARTED = "assets/checks and"  # the daemon's log line as an automation tick starts
TICK_FINISHED = "Finished auto-materialization tick"
LOCATIONS = 3  # workspace.yaml: saturated_dag, testbed, study
DAEMON_HEALTH = ("{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } "
                 "} } }")


def readme_ui_command() -> list[str]:
    """The command README's "After the first command" block starts the UI with (the line
    after ``init_instance.py``), as argv."""
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("python scripts/init_instance.py $DAGSTER_HOME"):
            return lines[i + 1].split("#")[0].split()
    raise AssertionError("README.md no longer initialises the instance before the UI")


def _default_signals() -> None:
    """What an interactive shell gives a job it starts: SIGINT and SIGTERM at their defaults."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _session(sid: int) -> dict[int, str]:
    """The live processes of session ``sid`` (zombies have exited: not counted), with their
    command lines."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
            if int(fields[3]) != sid or fields[0] in ("Z", "X"):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                found[int(entry)] = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # it ended while being read
    return found


def _role(command: str) -> str:
    for role in ("scripts/ui.sh", "dagster dev", "dagster_webserver", "dagster._daemon",
                 "code-server start", "api grpc"):
        if role in command:
            return role
    return command.split(" ")[0] or "(exiting)"


def _kill_session(sid: int) -> None:
    for pid in _session(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _daemon_healthy(url: str) -> bool:
    request = urllib.request.Request(f"{url}/graphql",
                                     data=json.dumps({"query": DAEMON_HEALTH}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            statuses = json.loads(response.read())["data"]["instance"]["daemonHealth"][
                "allDaemonStatuses"]
    except (urllib.error.URLError, ConnectionError, OSError, KeyError, TypeError):
        return False
    return bool(statuses) and all(s["healthy"] for s in statuses if s["required"])


def _wait(what: str, ready, process: subprocess.Popen[bytes], log: Path,
          timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if process.poll() is not None:
            pytest.fail(f"the UI exited (code {process.returncode}) before {what}: "
                        f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"no {what} in {timeout:.0f} s: {log.read_text(errors='replace')[-3000:]}")


@pytest.mark.parametrize("moment", ["ui_answers", "first_tick", "idle"])
def test_ui_stops_within_10_s_of_one_ctrl_c(moment: str, tmp_path: Path) -> None:
    command = readme_ui_command()
    assert command[:2] == ["bash", "scripts/ui.sh"], command
    home = tmp_path / "dagster_home"
    outputs = tmp_path / "outputs"
    env = {**os.environ, "DAGSTER_HOME": str(home), "VIRTUAL_ENV": str(BIN.parent),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           # what a run the daemon might start writes, kept out of the clone
           "SATURATED_DAG_OUTPUT_DIR": str(outputs / "demo"),
           "SATURATED_DAG_TESTBED_OUTPUT_DIR": str(outputs / "testbed"),
           "SATURATED_DAG_STUDY_OUTPUT_DIR": str(outputs / "study")}
    subprocess.run([str(BIN / "python"), "scripts/init_instance.py", str(home)], cwd=REPO_ROOT,
                   env=env, check=True, timeout=300)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "ui.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*command, "-p", str(port)], cwd=REPO_ROOT, env=env,
                                   stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=_default_signals)
    sid = process.pid  # the session's (and the Ctrl-C group's) id
    try:
        _wait("answer from the UI", lambda: _answers(url), process, log)
        _wait("daemon process", lambda: any("dagster._daemon run" in c
                                             for c in _session(sid).values()), process, log)
        if moment == "first_tick":
            _wait("automation tick", lambda: TICK_STARTED in log.read_text(errors="replace"),
                  process, log, timeout=120)
        elif moment == "idle":
            _wait("healthy daemon", lambda: _daemon_healthy(url), process, log, timeout=120)
            _wait("end of the first automation tick",
                  lambda: log.read_text(errors="replace").count(TICK_FINISHED) >= LOCATIONS,
                  process, log, timeout=180)
            time.sleep(3)  # the next tick is 30 s after the first
        before = _session(sid)
        roles = " ".join(before.values())
        for role in ("dagster_webserver", "dagster._daemon run", "code-server start",
                     "api grpc"):
            assert role in roles, f"no {role} process in the session: {before}"

        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: one SIGINT to the foreground group
        sent = time.monotonic()
        left = last = before
        while left and time.monotonic() - sent < STOP_WITHIN_S:
            process.poll()  # reap the command itself once it exits
            time.sleep(0.1)
            last, left = left, _session(sid)
        stopped = time.monotonic() - sent
        text = log.read_text(errors="replace")
        how = ("the rest killed at the grace" if "killing its processes" in text
               else "clean stop")
        print(f"{moment}: {len(before)} processes, all gone {stopped:.1f} s after the SIGINT"
              f" ({how}; last: {sorted({_role(c) for c in last.values()})})"
              if not left else f"{moment}: {len(left)} of {len(before)} left after"
              f" {STOP_WITHIN_S:.0f} s")
        assert not left, (f"{len(left)} of {len(before)} processes still running "
                          f"{STOP_WITHIN_S:.0f} s after one SIGINT: {left}\n{text[-3000:]}")
    finally:
        _kill_session(sid)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
