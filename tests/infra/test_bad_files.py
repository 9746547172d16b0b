"""Damaged inputs name themselves: a truncated asset Parquet names its file and asset, a
JSONL line that is not UTF-8 its file and line, a corrupted model weights file its path. They
used to surface as a bare polars error under the input's argument name (``run_8``), a
``UnicodeDecodeError`` with a byte offset, and a safetensors error naming no file."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.generation.models import load_model
from saturated_dag.tasks.base import DatasetFormatError
from saturated_dag.tasks.gsm8k import load_split
from tests.pipeline import asset_path, by_name, graph, resources

TINY = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                      "strict_grid": None, "eval_questions_per_cell": 2},
        "sampling": {"n": 2, "max_new_tokens": 6}}


def test_a_truncated_asset_file_names_the_file_and_the_asset(tmp_path: Path,
                                                             tiny_model_dir: Path) -> None:
    out = tmp_path / "out"
    overrides = {**TINY, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, _ = graph("demo", overrides)
    live = resources(out, "demo", overrides)
    pool = by_name(everything, "chain_sum", "generation_pool")
    assert dg.materialize(pool, resources=live).success
    file = asset_path(out, "chain_sum", "generation_pool")
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    parts = by_name(everything, "chain_sum", "difficulty_partitions")
    result = dg.materialize([*pool, *parts], selection=parts, resources=live,
                            raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    text = str(failure.event_specific_data)
    assert "chain_sum/generation_pool" in text and str(file) in text and "damaged" in text


def test_a_jsonl_line_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    good = b'{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\\n#### 2"}\n'
    (folder / "train.jsonl").write_bytes(good + b'{"question": "caf\xe9?", "answer": "#### 1"}\n')
    with pytest.raises(DatasetFormatError, match=rf"{folder / 'train.jsonl'}:2: not UTF-8 "
                                                 r"\(byte 0xe9 at column"):
        load_split(str(folder), "train")


def test_a_corrupted_weights_file_is_named(tmp_path: Path, tiny_model_dir: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    [weights] = list(copy.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    weights.write_bytes(bytes(data[: len(data) // 3]))  # truncated mid-tensor
    with pytest.raises((ValueError, FileNotFoundError), match=str(weights)):
        load_model(str(copy))
