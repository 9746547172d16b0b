#!/usr/bin/env bash
# `dagster job execute` of the `demo` job on the CI-sized profile (every asset kind at tiny
# sizes) against a fresh DAGSTER_HOME; exits non-zero unless the run and its checks succeed.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME="${DAGSTER_HOME_CI:-$PWD/.ci_dagster_home}"
export SATURATED_DAG_PROFILE=ci SATURATED_DAG_OUTPUT_DIR="${CI_OUTPUT_DIR:-$PWD/.ci_outputs}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
rm -rf "$DAGSTER_HOME" "$SATURATED_DAG_OUTPUT_DIR"
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
# the demo's parts, one run per partition set of the cells' adapters (jobs/staged.py), in order
parts=$(.venv/bin/python -m jobs.parts demo)
for job in $parts; do
  .venv/bin/dagster job execute -f definitions.py -j "$job" >> "$DAGSTER_HOME/run.log" 2>&1 || {
    tail -50 "$DAGSTER_HOME/run.log"; echo "CI job failed in $job"; exit 1; }
done
# shellcheck disable=SC2086
.venv/bin/python scripts/check_runs.py $parts
echo "CI job: $(grep -c STEP_SUCCESS "$DAGSTER_HOME/run.log") steps in $(( $(date +%s) - start )) s; tables in $SATURATED_DAG_OUTPUT_DIR/chain_sum/"
