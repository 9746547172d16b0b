from pathlib import Path

import pytest

from saturated_dag.generation import models, open_backend


def test_resolve_kinds(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert models.resolve(str(tiny_model_dir)).kind == "folder"
    assert models.resolve("Qwen/Qwen3-1.7B-Base").kind == "hub"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.resolve(str(gguf)).kind == "gguf"


def test_unknown_model_name_is_named() -> None:
    with pytest.raises(ValueError, match="unknown model name 'gpt-17'"):
        models.resolve("gpt-17")


def test_missing_model_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="model path not found"):
        models.resolve(str(tmp_path / "absent" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        models.resolve(str(tmp_path / "empty"))


def test_unknown_backend_is_named(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown generation backend 'jax'"):
        open_backend("jax", str(tiny_model_dir))
