#!/usr/bin/env bash
# Run the main job on the embedded default (demo profile), recorded in a local instance.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=${SATURATED_DAG_PROFILE:-demo}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
job=${1:-demo}
.venv/bin/dagster job execute -f definitions.py -j "$job"
# README's "Demo results" are the tables this run wrote (and the rules it used).
if [ "$job" = demo ] && [ "$SATURATED_DAG_PROFILE" = demo ]; then
  .venv/bin/python scripts/readme_results.py --profile demo
fi
