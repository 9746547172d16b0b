"""Atomic writes give their files the mode a plain ``open()`` would: ``0o666 & ~umask``.

``mkstemp`` creates its file 0600 whatever the umask, so before issue 15 every output
(Parquet, CSV, figures, result.json) was unreadable by the group of a shared output folder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from saturated_dag.infra.atomic import (
    atomic_write_bytes,
    atomic_write_csv,
    atomic_write_parquet,
    atomic_write_text,
)

UMASKS = [0o022, 0o002, 0o077]


@pytest.fixture(params=UMASKS, ids=[f"umask{m:03o}" for m in UMASKS])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask set to the parameter for one test, and restored after it."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writers_respect_the_umask(tmp_path: Path, umask: int) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what a plain open() gives: the reference
    assert _mode(plain) == 0o666 & ~umask
    frame = pl.DataFrame({"a": [1, 2]})
    written = [
        atomic_write_bytes(tmp_path / "b.bin", b"x"),
        atomic_write_text(tmp_path / "t.json", "{}"),
        atomic_write_parquet(frame, tmp_path / "f.parquet"),
        atomic_write_csv(frame, tmp_path / "f.csv"),
    ]
    for path in written:
        assert _mode(path) == _mode(plain), f"{path.name}: {_mode(path):o}"


def test_replacing_a_0600_file_gives_the_umask_mode(tmp_path: Path, umask: int) -> None:
    """An output written 0600 by an older version gets the umask's mode when rewritten."""
    path = tmp_path / "result.json"
    path.write_text("old")
    path.chmod(0o600)
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and _mode(path) == 0o666 & ~umask


def test_figures_respect_the_umask(tmp_path: Path, umask: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.infra.atomic import atomic_save_figure

    figure = plt.figure()
    try:
        path = atomic_save_figure(figure, tmp_path / "curve.png")
    finally:
        plt.close(figure)
    assert _mode(path) == 0o666 & ~umask


def test_umask_is_read_without_changing_it(umask: int) -> None:
    from saturated_dag.infra.atomic import current_umask, new_file_mode, new_folder_mode

    assert current_umask() == umask
    assert new_file_mode() == 0o666 & ~umask and new_folder_mode() == 0o777 & ~umask
    assert os.umask(umask) == umask  # unchanged by the reads above


def test_a_mkdtemp_folder_gets_the_umask_modes(tmp_path: Path, umask: int) -> None:
    """A folder staged with ``mkdtemp`` (0700) holding a 0600 file, as an adapter's is,
    ends with the modes ``mkdir``/``open`` would have given; links' targets are not changed."""
    import tempfile

    from saturated_dag.infra.atomic import give_umask_modes

    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o600)
    staged = Path(tempfile.mkdtemp(prefix=".adapter-", dir=tmp_path))
    (staged / "sub").mkdir()
    (staged / "sub" / "weights.safetensors").write_bytes(b"w")
    (staged / "sub" / "weights.safetensors").chmod(0o600)
    (staged / "link").symlink_to(outside)
    give_umask_modes(staged)
    assert _mode(staged) == _mode(staged / "sub") == 0o777 & ~umask
    assert _mode(staged / "sub" / "weights.safetensors") == 0o666 & ~umask
    assert _mode(outside) == 0o600


class _Saved:
    """Stands in for a transformers model or tokenizer: ``save_pretrained`` writes 0600."""

    config = type("Config", (), {"architectures": None})()

    def save_pretrained(self, folder: Path) -> None:
        weights = Path(folder) / f"{type(self).__name__}.safetensors"
        weights.write_bytes(b"w")
        weights.chmod(0o600)


def test_gguf_conversion_cleans_a_killed_conversion_and_follows_the_umask(
        tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    from saturated_dag.generation import models

    monkeypatch.setenv("SATURATED_DAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: type("Tokenizer", (_Saved,), {})())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: type("Model", (_Saved,), {})())
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    target = models._gguf_cache_folder(models.resolve(str(gguf)))
    killed = target.parent / f".{target.name}-abcd1234"  # a conversion SIGKILLed mid-save
    killed.mkdir(parents=True)
    (killed / "Model.safetensors").write_bytes(b"half")
    unrelated = target.parent / f".{target.name}-run"  # not a scratch folder's name
    unrelated.mkdir()

    assert models.local_model_dir(str(gguf)) == str(target)
    assert not killed.exists() and unrelated.exists()
    assert sorted(p.name for p in target.iterdir()) == [
        "CONVERTED_FROM.json", "Model.safetensors", "Tokenizer.safetensors"]
    assert _mode(target) == 0o777 & ~umask
    assert _mode(target / "Model.safetensors") == 0o666 & ~umask
