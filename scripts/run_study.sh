#!/usr/bin/env bash
# The embedded study (docs/study.md): the `study` job on profile `study`, recorded in a local
# instance, then its report written to the output folder (outputs/study/study_report.md).
# The study results in docs/results.md are a snapshot: refresh them explicitly with
# `.venv/bin/python scripts/study_report.py --results-doc` after this run.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
export SATURATED_DAG_PROFILE=study
export SATURATED_DAG_OUTPUT_DIR=${SATURATED_DAG_OUTPUT_DIR:-outputs/study}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
.venv/bin/python scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
# the job's parts: one run per partition set of the cells' adapters (jobs/staged.py), in order, in one
# process (the runs `dagster job execute -f definitions.py -j <part>` makes, one load)
.venv/bin/python -m run_parts study
end=$(date +%s)
echo "study job: $((end - start)) s"
.venv/bin/python scripts/run_record.py --output-dir "$SATURATED_DAG_OUTPUT_DIR" --job study \
  --profile study --wall-seconds "$((end - start))"
.venv/bin/python scripts/study_report.py --output-dir "$SATURATED_DAG_OUTPUT_DIR"
