"""Shared fixtures: offline, CPU, tiny models built here from a config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from tests.tiny_models import build_tiny_model

REPO_ROOT = Path(__file__).resolve().parent.parent
GSM8K_DIR = REPO_ROOT.parent / "shared" / "data" / "gsm8k"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Llama with a trained BPE tokenizer and a chat template."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny_base_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same without a chat template (a base model: prompts stay plain)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_base") / "model", chat_template=False)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SATURATED_DAG_CACHE", str(tmp_path / "cache"))
