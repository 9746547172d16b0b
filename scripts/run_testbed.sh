#!/usr/bin/env bash
# The calibrated testbed (docs/testbed.md): the `testbed` job on profile `testbed`, recorded in
# a local instance; prints its verdicts and validation table. Rewrites no tracked file.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=testbed
export SATURATED_DAG_OUTPUT_DIR=${SATURATED_DAG_OUTPUT_DIR:-outputs/testbed}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
# the job's parts (jobs/staged.py): the oracle cells' configurations, then the cells that train the
# recipes their selections chose, the eval reports and the analysis; in one process
.venv/bin/python -m run_parts testbed
end=$(date +%s)
echo "testbed job: $((end - start)) s"
.venv/bin/python scripts/testbed_report.py --output-dir "$SATURATED_DAG_OUTPUT_DIR"
