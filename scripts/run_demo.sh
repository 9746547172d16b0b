#!/usr/bin/env bash
# Run the main job on the embedded default (demo profile), recorded in a local instance.
# Results go to the output folder (default outputs/) and the UI; nothing tracked is rewritten.
# The demo results in docs/results.md are a snapshot: refresh them explicitly with
# `.venv/bin/python scripts/readme_results.py` after this run.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=${SATURATED_DAG_PROFILE:-demo}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
out=${SATURATED_DAG_OUTPUT_DIR:-outputs}
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
job=${1:-demo}
start=$(date +%s)
# the job's parts: one run per partition set of the cells' adapters (jobs/staged.py), in order, in one
# process (the runs `dagster job execute -f definitions.py -j <part>` makes, one load)
.venv/bin/python -m run_parts "$job"
wall=$(( $(date +%s) - start ))
# what produced these tables (commit, machine, wall time), for a docs/results.md snapshot
.venv/bin/python scripts/run_record.py --output-dir "$out" --job "$job" \
  --profile "$SATURATED_DAG_PROFILE" --wall-seconds "$wall"
echo "tables in $out/<task>/ (results_table.md, runs_table.csv, ...); the web UI: bash scripts/ui.sh"
