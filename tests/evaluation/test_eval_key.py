"""An adapter's eval report keys on its weights file, not on the records beside it.

Issue 15 item 5: ``training_config.json`` and ``result.json`` carry timings (and the cache key
of the run), so a key over the whole adapter folder re-ran the eval of a retrained but
identical adapter. ``adapter_weights_version`` hashes ``adapter_model.safetensors`` only.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from assets._adapter_files import ADAPTER_WEIGHTS, adapter_weights_version
from saturated_dag.infra.shards import file_fingerprint, stage_key


def _adapter(folder: Path, weights: bytes, seconds: float) -> Path:
    """An adapter folder as training leaves it: weights plus timed record files."""
    folder.mkdir(parents=True)
    (folder / ADAPTER_WEIGHTS).write_bytes(weights)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 4}))
    (folder / "training_config.json").write_text(json.dumps({"best_epoch": 1,
                                                            "train_runtime": seconds}))
    (folder / "result.json").write_text(json.dumps({"wall_seconds": seconds}))
    return folder


def _eval_key(adapter: Path) -> str:
    """The key an eval report of ``adapter`` is stored under (``assets/eval_reports.py``'s
    config, the rest held fixed)."""
    config = {"policy": "tiny", "sampling": {"n": 4}, "answer_check": "default",
              "adapter": adapter_weights_version(adapter), "shard_questions": 8}
    return stage_key("gsm8k/easy/eval/sft", "code-v1", config, {"questions": "q"})


def test_identical_weights_give_the_same_eval_key_whatever_the_timings(tmp_path: Path) -> None:
    first = _adapter(tmp_path / "run1" / "sft", b"weights-A", seconds=12.5)
    again = _adapter(tmp_path / "run2" / "sft", b"weights-A", seconds=97.25)
    assert adapter_weights_version(first) == adapter_weights_version(again)
    assert _eval_key(first) == _eval_key(again)
    # what the key must not be: a hash over the whole folder changes with the timings
    assert file_fingerprint(first) != file_fingerprint(again)


def test_different_weights_give_a_different_eval_key(tmp_path: Path) -> None:
    first = _adapter(tmp_path / "run1" / "sft", b"weights-A", seconds=12.5)
    other = _adapter(tmp_path / "run2" / "sft", b"weights-B", seconds=12.5)
    assert adapter_weights_version(first) != adapter_weights_version(other)
    assert _eval_key(first) != _eval_key(other)


def test_an_adapter_without_weights_is_a_clear_failure(tmp_path: Path) -> None:
    folder = tmp_path / "sft"
    folder.mkdir()
    (folder / "training_config.json").write_text("{}")
    with pytest.raises(dg.Failure, match=f"has no {ADAPTER_WEIGHTS}: re-materialise it"):
        adapter_weights_version(folder)
