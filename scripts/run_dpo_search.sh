#!/usr/bin/env bash
# DPO's recipe search and diagnosis (docs/testbed.md): the `dpo_recipe_search` job on profile
# `dpo_search` (the default) or `dpo_diagnosis` (`bash scripts/run_dpo_search.sh dpo_diagnosis`),
# recorded in a local instance; its table, figure and verdicts are under
# outputs/<profile>/chain_sum/dpo_recipe_search.*
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-dpo_search}
case "$profile" in
  dpo_search|dpo_diagnosis) ;;
  *) echo "usage: $0 [dpo_search|dpo_diagnosis]  (got: $profile)" >&2; exit 2 ;;
esac
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=$profile
export SATURATED_DAG_OUTPUT_DIR=${SATURATED_DAG_OUTPUT_DIR:-outputs/$profile}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
.venv/bin/python -m run_parts dpo_recipe_search
end=$(date +%s)
echo "dpo_recipe_search job: $((end - start)) s"
.venv/bin/python scripts/run_record.py --output-dir "$SATURATED_DAG_OUTPUT_DIR" \
  --job dpo_recipe_search --profile "$profile" --wall-seconds "$((end - start))"
cat "$SATURATED_DAG_OUTPUT_DIR/chain_sum/dpo_recipe_search.json"
