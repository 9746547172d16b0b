#!/usr/bin/env bash
# DPO's recipe search (docs/testbed.md, "DPO's recipe search"): the `dpo_recipe_search` job on
# profile `dpo_search`, recorded in a local instance; its table, figure and verdicts are under
# outputs/dpo_search/chain_sum/dpo_recipe_search.*
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=dpo_search
export SATURATED_DAG_OUTPUT_DIR=${SATURATED_DAG_OUTPUT_DIR:-outputs/dpo_search}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
.venv/bin/python -m run_parts dpo_recipe_search
end=$(date +%s)
echo "dpo_recipe_search job: $((end - start)) s"
.venv/bin/python scripts/run_record.py --output-dir "$SATURATED_DAG_OUTPUT_DIR" \
  --job dpo_recipe_search --profile dpo_search --wall-seconds "$((end - start))"
cat "$SATURATED_DAG_OUTPUT_DIR/chain_sum/dpo_recipe_search.json"
