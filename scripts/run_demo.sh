#!/usr/bin/env bash
# Run the main job on the embedded default (demo profile), recorded in a local instance.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=${SATURATED_DAG_PROFILE:-demo}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
mkdir -p "$DAGSTER_HOME"
[ -f "$DAGSTER_HOME/dagster.yaml" ] || cp dagster.yaml "$DAGSTER_HOME/dagster.yaml"
exec .venv/bin/dagster job execute -f definitions.py -j "${1:-demo}"
