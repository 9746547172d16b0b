#!/usr/bin/env bash
# The GPU check, in one command on an offline GPU machine: install the wheels that
# scripts/gpu_wheels.sh put in .whl/ (no index, no network), then measure the paper profile's
# rates at Qwen3-1.7B-Base's shapes (benchmarks/gpu_check.py). Writes $OUT/gpu_check.json and
# $OUT/gpu_check.log; OUT defaults to outputs/gpu_check.
#
# Why one command of well under 8 minutes (about 6.5 at most): a lent GPU machine runs one
# command of at most 10, on 15 minutes of device time that must leave room for one rerun and
# the machine's start. The wheels install into a folder of their own
# (GPU_CHECK_SITE) put first on PYTHONPATH, so the machine's own packages stay as they are.
# The Python check stops starting measurements after GPU_CHECK_BUDGET_S seconds (default 300)
# and is killed at GPU_CHECK_TIMEOUT_S (default 360); the JSON is rewritten after every
# measurement, so a cut-short run keeps what it measured. Then, here:
#   .venv/bin/python scripts/paper_cost.py --profile paper --rates gpu_check.json
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/gpu_check}
PYTHON=${PYTHON:-python3}
SITE=${GPU_CHECK_SITE:-/tmp/gpu_check_site}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

echo "gpu_check.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if compgen -G ".whl/*.whl" >/dev/null; then
  start=$(date +%s)
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --disable-pip-version-check --target "$SITE" .whl/*.whl
  echo "installed $(ls .whl/*.whl | wc -l) wheels into $SITE in $(( $(date +%s) - start )) s"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "no .whl/ here: using the packages installed (run scripts/gpu_wheels.sh first where they are missing)"
fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_DATASETS_DISABLE_PROGRESS_BARS=1
timeout "${GPU_CHECK_TIMEOUT_S:-360}" "$PYTHON" -m benchmarks.gpu_check --shapes paper \
  --out "$OUT/gpu_check.json" --budget-s "${GPU_CHECK_BUDGET_S:-300}" "$@"
echo "wrote $OUT/gpu_check.json and $LOG"
