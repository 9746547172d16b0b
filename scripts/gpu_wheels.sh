#!/usr/bin/env bash
# Download into .whl/ the pinned wheels an offline GPU machine lacks for the GPU check
# (benchmarks/gpu_wheels.txt: TRL and what it needs beyond the machine's torch, transformers,
# peft, accelerate, pyarrow, pandas and scipy), then print their total size.
#
# Why a size check: the wheels travel with the working tree, and a call to the GPU machine
# carries at most 64 MiB in all. The wheels must stay under 40 MiB, and the wheels plus the
# tree that travels (tracked and untracked files git does not ignore) under 64 MiB; the script
# fails otherwise.
#
# Runs here, where pip reaches the package index. The machine's Python is 3.12 (GPU_PYTHON to
# change it): wheels are fetched for that version and manylinux x86-64, without their
# dependencies (the list names each one that is needed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
GPU_PYTHON=${GPU_PYTHON:-3.12}
MIB=1048576
WHEELS_LIMIT=$((40 * MIB))
CARRY_LIMIT=$((64 * MIB))

mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' benchmarks/gpu_wheels.txt | grep -v '^$')
rm -rf .whl   # one version of each: a stale second version would stop the install there
mkdir -p .whl
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$GPU_PYTHON" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${pins[@]}"

count=$(find .whl -maxdepth 1 -type f -name '*.whl' | wc -l)
if [ "$count" -ne "${#pins[@]}" ]; then
  echo "expected ${#pins[@]} wheels in .whl/, found $count" >&2
  exit 1
fi
wheels=$(find .whl -maxdepth 1 -type f -name '*.whl' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
tree=$(git ls-files -z --cached --others --exclude-standard \
         | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
find .whl -maxdepth 1 -type f -name '*.whl' -printf '%s %f\n' | sort -rn \
  | awk -v m=$MIB '{printf "  %6.2f MiB  %s\n", $1 / m, $2}'
awk -v w="$wheels" -v t="$tree" -v m=$MIB -v n="$count" 'BEGIN {
  printf "wheels: %d files, %.2f MiB in all (limit 40 MiB)\n", n, w / m
  printf "with the working tree that travels beside them (%.2f MiB): %.2f MiB (limit 64 MiB)\n",
         t / m, (w + t) / m }'
if [ "$wheels" -ge "$WHEELS_LIMIT" ] || [ $((wheels + tree)) -ge "$CARRY_LIMIT" ]; then
  echo "over the limit: carry fewer wheels" >&2
  exit 1
fi
