#!/usr/bin/env bash
# The rehearsal of the paper's GPU path (docs/paper-run.md): `dagster job execute` of the
# paper's jobs, paper_chain_sum then paper_gsm8k, on the `rehearsal` profile (the `paper`
# profile's structure on tiny random-weight Qwen3 / Qwen3-MoE models, vLLM on CPU), against a
# fresh DAGSTER_HOME, in the vLLM environment (`bash .ci/vllm_env.sh`). Exits non-zero unless
# both runs succeed, every asset check passes and the residency log keeps the device's rules.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-$PWD/.venv-vllm}"
export DAGSTER_HOME="${DAGSTER_HOME_REHEARSAL:-$PWD/.rehearsal_dagster_home}"
export SATURATED_DAG_PROFILE=rehearsal
export SATURATED_DAG_OUTPUT_DIR="${REHEARSAL_OUTPUT_DIR:-$PWD/.rehearsal_outputs}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
rm -rf "$DAGSTER_HOME" "$SATURATED_DAG_OUTPUT_DIR"
mkdir -p "$DAGSTER_HOME" && cp dagster.yaml "$DAGSTER_HOME/"
start=$(date +%s)
for job in paper_chain_sum paper_gsm8k; do
  t=$(date +%s)
  "$VENV/bin/dagster" job execute -f definitions.py -j "$job" > "$DAGSTER_HOME/$job.log" 2>&1 || {
    tail -80 "$DAGSTER_HOME/$job.log"; echo "rehearsal: $job failed"; exit 1; }
  echo "rehearsal: $job: $(grep -c STEP_SUCCESS "$DAGSTER_HOME/$job.log") steps in $(( $(date +%s) - t )) s"
done
"$VENV/bin/python" scripts/check_runs.py paper_chain_sum paper_gsm8k
"$VENV/bin/python" - "$SATURATED_DAG_OUTPUT_DIR/residency" <<'PY'
import sys
from pathlib import Path

from saturated_dag.residency import read_events, summary

for path in sorted(Path(sys.argv[1]).glob("*.jsonl")):
    print(f"residency {path.stem}: {summary(read_events(path))}")
PY
SATURATED_DAG_REHEARSAL_OUTPUT="$SATURATED_DAG_OUTPUT_DIR" \
  "$VENV/bin/python" -m pytest tests/test_residency.py -m slow -q -p no:cacheprovider
echo "rehearsal finished in $(( $(date +%s) - start )) s; outputs in $SATURATED_DAG_OUTPUT_DIR"
