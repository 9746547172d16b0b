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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``heavy`` first, each file's tests kept together and in order.

    README's test command runs a worker per core (``-n auto``) that takes a whole file at a
    time in this order (``--dist loadfile --no-loadscope-reorder``, pyproject.toml). Handed
    out last, the longest file (``test_fault_injection.py``, about 3 minutes) ran alone on
    one worker while the other sat idle; started first, the short files fill in beside it.
    """
    heavy = {item.path for item in items if item.get_closest_marker("heavy")}
    items.sort(key=lambda item: item.path not in heavy)
