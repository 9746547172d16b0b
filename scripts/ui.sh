#!/usr/bin/env bash
# The web UI and its daemon over workspace.yaml's three code locations (README, "After the
# first command"): `dagster dev -w workspace.yaml`, options passed on (`-p 3001`), which one
# Ctrl-C stops within 10 s (tests/project/test_dev_stops.py).
#
# Why not `dagster dev` alone: on Ctrl-C it waits for its daemon (up to 60 s), and the daemon
# first ends the automation tick it is in, over all three locations (about 7 s on an idle
# machine); meanwhile `dagster dev` restarts the code servers that the same Ctrl-C stopped.
# Measured (docs/reliability.md, "Stopping the UI"): 3.6 s between ticks, 21 s in the daemon's
# first tick, and under load 41 s, with restarted code servers running until 95 s. So here the
# interrupt goes to all of `dagster dev`'s processes, as the terminal sends it, and what still
# runs SATURATED_DAG_UI_GRACE seconds later (default 7) is killed; a second Ctrl-C kills at once.
# The daemon takes an automation tick it was killed in up again on its next start. A run in
# progress gets the interrupt too, as from `dagster dev` in a terminal, and is killed if it is
# still running at the grace.
set -uo pipefail
cd "$(dirname "$0")/.."
grace=${SATURATED_DAG_UI_GRACE:-7}
dagster=dagster
[ -x .venv/bin/dagster ] && dagster=.venv/bin/dagster   # the project's environment, activated or not

# A process group of its own (job control), so that its SIGINT is not ignored: a script's
# background command otherwise starts with SIGINT ignored. The terminal's Ctrl-C reaches this
# script, which passes it on.
set -m
"$dagster" dev -w workspace.yaml "$@" &
dev=$!
set +m

now_us() {   # sets $now: the clock in microseconds (bash 5; whole seconds before)
  now=${EPOCHREALTIME:-}; now=${now//[.,]/}; [ -n "$now" ] || now=$((SECONDS * 1000000))
}

stop() {
  trap 'kill -KILL -- "-$dev" 2>/dev/null' INT TERM HUP
  kill -INT -- "-$dev" 2>/dev/null   # what Ctrl-C sends `dagster dev` run from the terminal
  now_us; local deadline=$((now + grace * 1000000))
  while kill -0 -- "-$dev" 2>/dev/null; do   # anything left of its group
    now_us
    if [ "$now" -ge "$deadline" ]; then
      echo "ui.sh: dagster dev still running ${grace} s after the interrupt; killing its processes" >&2
      kill -KILL -- "-$dev" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  exit 130
}
trap stop INT TERM HUP
wait "$dev"
rc=$?
kill -KILL -- "-$dev" 2>/dev/null   # it ended by itself (a port in use): nothing of it outlives it
exit "$rc"
