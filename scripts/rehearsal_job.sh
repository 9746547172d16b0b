#!/usr/bin/env bash
# The rehearsal of the paper's GPU path (docs/paper-run.md): `dagster job execute` of the
# paper's jobs (paper_chain_sum, paper_gsm8k: one per task of the profile) on a rehearsal
# profile (`rehearsal`, the `paper` profile's structure, by default; `rehearsal_instruct`,
# `paper_instruct`'s) with tiny random-weight Qwen3 / Qwen3-MoE models and vLLM on CPU, against
# a fresh DAGSTER_HOME, in the vLLM environment (`bash .ci/vllm_env.sh`). Exits non-zero
# unless every run succeeds, every asset check passes and the residency log keeps the rules.
#
#   bash scripts/rehearsal_job.sh                                   # rehearsal
#   REHEARSAL_PROFILE=rehearsal_instruct bash scripts/rehearsal_job.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-$PWD/.venv-vllm}"
PROFILE="${REHEARSAL_PROFILE:-rehearsal}"
export DAGSTER_HOME="${DAGSTER_HOME_REHEARSAL:-$PWD/.rehearsal_dagster_home/$PROFILE}"
export SATURATED_DAG_PROFILE="$PROFILE"
export SATURATED_DAG_OUTPUT_DIR="${REHEARSAL_OUTPUT_DIR:-$PWD/.rehearsal_outputs/$PROFILE}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
rm -rf "$DAGSTER_HOME" "$SATURATED_DAG_OUTPUT_DIR"
"$VENV/bin/python" scripts/init_instance.py "$DAGSTER_HOME"   # tables exist before any run
start=$(date +%s)
# each task's paper job, as its parts: one run per partition set of the cells' adapters (jobs/staged.py)
jobs=$(for task in $("$VENV/bin/python" -c "from saturated_dag.profiles import load_profile
print(' '.join(load_profile('$PROFILE').tasks))"); do "$VENV/bin/python" -m jobs.parts "paper_$task"; done)
for job in $jobs; do
  t=$(date +%s)
  "$VENV/bin/dagster" job execute -f definitions.py -j "$job" > "$DAGSTER_HOME/$job.log" 2>&1 || {
    tail -80 "$DAGSTER_HOME/$job.log"; echo "rehearsal ($PROFILE): $job failed"; exit 1; }
  echo "rehearsal ($PROFILE): $job: $(grep -c STEP_SUCCESS "$DAGSTER_HOME/$job.log") steps in $(( $(date +%s) - t )) s"
done
# shellcheck disable=SC2086
"$VENV/bin/python" scripts/check_runs.py $jobs
"$VENV/bin/python" - "$SATURATED_DAG_OUTPUT_DIR/residency" <<'PY'
import sys
from pathlib import Path

from saturated_dag.infra.residency import read_events, summary

for path in sorted(Path(sys.argv[1]).glob("*.jsonl")):
    print(f"residency {path.stem}: {summary(read_events(path))}")
PY
SATURATED_DAG_REHEARSAL_OUTPUT="$SATURATED_DAG_OUTPUT_DIR" SATURATED_DAG_REHEARSAL_RUNS=$(wc -w <<< "$jobs") \
  "$VENV/bin/python" -m pytest tests/infra/test_residency.py -m slow -q -p no:cacheprovider
echo "rehearsal ($PROFILE) finished in $(( $(date +%s) - start )) s; outputs in $SATURATED_DAG_OUTPUT_DIR"
