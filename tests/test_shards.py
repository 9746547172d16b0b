"""Shard stores, stage keys and atomic writes (``saturated_dag.shards``, ``.atomic``)."""

import errno
import os
from pathlib import Path

import pandas as pd
import pytest

from saturated_dag.atomic import OutputWriteError, atomic_write_parquet, atomic_write_text
from saturated_dag.shards import (
    ShardStore,
    frame_digest,
    is_complete,
    mark_complete,
    plan_shards,
    run_shards,
    shard_seed,
    stage_dir,
    stage_key,
)


def _compute(calls: list[int]):
    def compute(index: int, part: list[int]) -> pd.DataFrame:
        calls.append(index)
        return pd.DataFrame({"item": part, "square": [i * i for i in part]})
    return compute


def test_plan_is_fixed_ranges() -> None:
    assert plan_shards(10, 4) == [range(0, 4), range(4, 8), range(8, 10)]
    assert plan_shards(3, None) == [range(0, 3)]
    assert plan_shards(0, 4) == []


def test_resume_computes_only_missing_shards_and_counts(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "s", "k")
    calls: list[int] = []
    full, stats = store.run(list(range(10)), 3, _compute(calls))
    assert calls == [0, 1, 2, 3] and stats.cache == "miss"
    assert (stats.shards_total, stats.shards_computed, stats.shards_reused) == (4, 4, 0)

    store.shard_path(1).unlink()
    store.shard_path(3).unlink()
    calls.clear()
    again, stats = store.run(list(range(10)), 3, _compute(calls))
    assert calls == [1, 3] and stats.cache == "resumed"
    assert (stats.shards_reused, stats.shards_computed) == (2, 2)
    pd.testing.assert_frame_equal(again, full)

    calls.clear()
    hit, stats = store.run(list(range(10)), 3, _compute(calls))
    assert calls == [] and stats.cache == "hit" and stats.shards_reused == 4
    assert "cache hit" in stats.message("demo/stage")
    pd.testing.assert_frame_equal(hit, full)
    # without a store: the same plan and the same result, nothing kept
    mem, stats = run_shards(None, list(range(10)), 3, _compute([]))
    pd.testing.assert_frame_equal(mem, full)


def test_leftover_temp_file_is_ignored_and_truncated_shard_recomputed(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "s", "k")
    full, _ = store.run(list(range(6)), 2, _compute([]))
    # a crash mid-write leaves only a temporary file beside the shard: never read
    store.shard_path(2).rename(store.root / ".shard-00002.parquet.abc.tmp")
    # a shard damaged outside our writer (truncated): detected by its footer, recomputed
    data = store.shard_path(0).read_bytes()
    store.shard_path(0).write_bytes(data[: len(data) // 2])
    calls: list[int] = []
    again, stats = store.run(list(range(6)), 2, _compute(calls))
    assert calls == [0, 2] and stats.shards_reused == 1
    pd.testing.assert_frame_equal(again, full)
    assert not list(store.root.glob(".*.tmp"))


def test_changed_plan_under_one_key_discards_old_shards(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "s", "k")
    store.run(list(range(6)), 2, _compute([]))
    calls: list[int] = []
    store.run(list(range(6)), 3, _compute(calls))
    assert calls == [0, 1]


def test_stage_key_tracks_inputs_config_and_code() -> None:
    frame = pd.DataFrame({"q": ["a", "b"], "x": [1, 2]})
    base = stage_key("gen", "1", {"n": 8}, {"pool": frame})
    assert base == stage_key("gen", "1", {"n": 8}, {"pool": frame.copy()})
    assert base != stage_key("gen", "2", {"n": 8}, {"pool": frame})
    assert base != stage_key("gen", "1", {"n": 4}, {"pool": frame})
    assert base != stage_key("gen", "1", {"n": 8}, {"pool": frame.assign(x=[1, 3])})
    assert base != stage_key("judge", "1", {"n": 8}, {"pool": frame})
    assert frame_digest(frame) != frame_digest(frame.astype({"x": "float64"}))


def test_shard_seeds_are_distinct_and_stable() -> None:
    seeds = [shard_seed(0, i) for i in range(100)]
    assert len(set(seeds)) == 100 and seeds == [shard_seed(0, i) for i in range(100)]
    assert shard_seed(1, 0) != shard_seed(0, 0) and all(0 <= s < 2**31 for s in seeds)


def test_completed_folder_marker(tmp_path: Path) -> None:
    folder = stage_dir(tmp_path, "train", "abc")
    folder.mkdir(parents=True)
    assert not is_complete(folder)
    mark_complete(folder, {"epochs": 2})
    assert is_complete(folder)


def test_atomic_write_failure_keeps_previous_file_and_names_the_cause(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out" / "table.parquet"
    atomic_write_parquet(pd.DataFrame({"a": [1, 2]}), path)
    before = path.read_bytes()

    def full_disk(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OutputWriteError) as err:
        atomic_write_parquet(pd.DataFrame({"a": [3]}), path)
    message = str(err.value)
    assert str(path) in message and "disk is full" in message and "ENOSPC" in message
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["table.parquet"]  # no leftovers
    monkeypatch.undo()
    atomic_write_text(tmp_path / "x.md", "hello")
    assert (tmp_path / "x.md").read_text() == "hello"


def test_unchanged_eval_report_is_a_cache_hit_and_covers_every_question(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Issue 7.2: the second materialisation reuses every shard, says so, loads no model."""
    import json

    import dagster as dg

    from assets.eval_reports import eval_report_assets, eval_report_checks
    from resources import ExperimentResource, GenerationResource, ParquetIOManager

    overrides = {"chain_sum": {"grid": {"terms": [2, 3], "digits": [1, 1]},
                               "questions_per_cell": 2, "eval_questions_per_cell": 2,
                               "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
                               "strict_questions_per_cell": 2},
                 "sampling": {"n": 2, "max_new_tokens": 6}, "stages": {"shard_questions": 3}}
    assets = eval_report_assets("chain_sum", [])
    resources = {
        "experiment": ExperimentResource(profile="demo", overrides_json=json.dumps(overrides),
                                         output_dir=str(tmp_path / "out")),
        "policy": GenerationResource(model=str(tiny_model_dir), batch_size=8),
        "parquet_io": ParquetIOManager(base_dir=str(tmp_path / "assets")),
    }

    def run() -> tuple[dict, list]:
        result = dg.materialize([*assets, *eval_report_checks(assets)], resources=resources)
        meta = result.asset_materializations_for_node("chain_sum__eval__base")[0].metadata
        return {k: v.value for k, v in meta.items()}, result.get_asset_check_evaluations()

    first, checks = run()
    assert (first["cache"], first["shards_total"], first["shards_computed"]) == ("miss", 2, 2)
    # the stage is the asset's own key (tests/test_distinct_paths.py relies on it)
    assert Path(first["shards_dir"]) == (tmp_path / "out" / "stages" / "chain_sum__eval__base"
                                         / first["cache_key"])
    assert len(checks) == 1 and checks[0].passed
    assert checks[0].metadata["expected_questions"].value == 4
    GenerationResource._loaded.clear()  # a hit must not need the model: none is cached
    second, checks = run()
    assert second["cache"] == "hit" and second["shards_reused"] == 2
    assert second["shards_computed"] == 0 and second["cache_key"] == first["cache_key"]
    assert second["pass@1"] == first["pass@1"] and checks[0].passed
    assert not GenerationResource._loaded
