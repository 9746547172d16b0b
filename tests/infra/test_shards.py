"""Shard stores, stage keys and atomic writes (``saturated_dag.infra.shards``, ``.atomic``)."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from saturated_dag.infra.atomic import OutputWriteError, atomic_write_parquet, atomic_write_text
from saturated_dag.infra.shards import (
    ShardStore,
    digest_of,
    frame_digest,
    is_complete,
    mark_complete,
    plan_shards,
    run_shards,
    shard_seed,
    stage_dir,
    stage_key,
)
from tests.conftest import REPO_ROOT


def _compute(calls: list[int]):
    def compute(index: int, part: list[int]) -> pl.DataFrame:
        calls.append(index)
        return pl.DataFrame({"item": part, "square": [i * i for i in part]})
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
    assert_frame_equal(again, full)

    calls.clear()
    hit, stats = store.run(list(range(10)), 3, _compute(calls))
    assert calls == [] and stats.cache == "hit" and stats.shards_reused == 4
    assert "cache hit" in stats.message("demo/stage")
    assert_frame_equal(hit, full)
    # without a store: the same plan and the same result, nothing kept
    mem, stats = run_shards(None, list(range(10)), 3, _compute([]))
    assert_frame_equal(mem, full)


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
    assert_frame_equal(again, full)
    assert not list(store.root.glob(".*.tmp"))


def test_an_edited_shard_is_recomputed_naming_its_path(tmp_path: Path) -> None:
    """A shard whose bytes are not what its stage wrote (edited by hand, or replaced by
    another stage's file) is never reused as this stage's work: it used to be, its content
    then recorded as legitimate. The manifest keeps each shard's hash."""
    store = ShardStore(tmp_path / "s", "k")
    full, _ = store.run(list(range(6)), 2, _compute([]))
    manifest = json.loads((store.root / "manifest.json").read_text())
    assert set(manifest["hashes"]) == {"0", "1", "2"}
    edited = pl.read_parquet(store.shard_path(1)).with_columns(pl.lit(-1).alias("x"))
    edited.write_parquet(store.shard_path(1))  # a whole, readable, different shard
    calls: list[int] = []
    said: list[str] = []
    again, stats = store.run(list(range(6)), 2, _compute(calls), log=said.append)
    assert calls == [1] and stats.shards_reused == 2
    assert_frame_equal(again, full)
    assert any(str(store.shard_path(1)) in line and "does not match the hash" in line
               for line in said)
    # a shard with no recorded hash (written before hashes were kept) is computed again
    manifest = json.loads((store.root / "manifest.json").read_text())
    del manifest["hashes"]["0"]
    (store.root / "manifest.json").write_text(json.dumps(manifest))
    calls.clear()
    store.run(list(range(6)), 2, _compute(calls))
    assert calls == [0]


def test_changed_plan_under_one_key_discards_old_shards(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "s", "k")
    store.run(list(range(6)), 2, _compute([]))
    calls: list[int] = []
    store.run(list(range(6)), 3, _compute(calls))
    assert calls == [0, 1]


def test_stage_key_tracks_inputs_config_and_code() -> None:
    frame = pl.DataFrame({"q": ["a", "b"], "x": [1, 2]})
    base = stage_key("gen", "1", {"n": 8}, {"pool": frame})
    assert base == stage_key("gen", "1", {"n": 8}, {"pool": frame.clone()})
    assert base != stage_key("gen", "2", {"n": 8}, {"pool": frame})
    assert base != stage_key("gen", "1", {"n": 4}, {"pool": frame})
    edited = frame.with_columns(x=pl.Series([1, 3]))
    assert base != stage_key("gen", "1", {"n": 8}, {"pool": edited})
    assert base != stage_key("judge", "1", {"n": 8}, {"pool": frame})
    assert frame_digest(frame) != frame_digest(frame.cast({"x": pl.Float64}))


def _digest_frame() -> pl.DataFrame:
    return pl.DataFrame({
        "id": ["q1", "q2", None, "long text " * 5],
        "n": [1, None, 3, -4],
        "score": [0.1, float("nan"), -0.0, 1e300],
        "ok": [True, False, None, True],
        "tags": [["a"], [], None, ["b", "c"]],
    })


def test_frame_digest_is_the_same_in_another_process() -> None:
    """Cache keys are compared across runs: the digest may not depend on the process (hash
    seeds, memory layout). A fresh interpreter computes it again."""
    code = ("from tests.infra.test_shards import _digest_frame; "
            "from saturated_dag.infra.shards import frame_digest; "
            "print(frame_digest(_digest_frame()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=REPO_ROOT, env=env).stdout.strip()
    assert other == frame_digest(_digest_frame())


def test_frame_digest_sees_every_cell_and_not_the_layout() -> None:
    frame = _digest_frame()
    digests = {frame_digest(frame)}
    changed = {"id": "q9", "n": 7, "score": 0.2, "ok": False, "tags": ["z"]}
    for row in range(frame.height):
        for column, value in changed.items():
            cells = frame[column].to_list()
            cells[row] = value if cells[row] != value else None
            digests.add(frame_digest(frame.with_columns(
                pl.Series(column, cells, dtype=frame.schema[column]))))
    assert len(digests) == 1 + frame.height * frame.width  # every single-cell edit is seen
    # null and NaN, -0.0 and 0.0, row order, column names and order are all content
    assert frame_digest(frame.with_columns(score=pl.Series([0.1, None, -0.0, 1e300]))) \
        not in digests
    assert frame_digest(frame.with_columns(score=pl.Series([0.1, float("nan"), 0.0, 1e300]))) \
        not in digests
    assert frame_digest(frame.reverse()) not in digests
    assert frame_digest(frame.rename({"n": "m"})) not in digests
    assert frame_digest(frame.select(reversed(frame.columns))) not in digests
    # the same content built in pieces (several chunks) hashes the same
    pieces = pl.concat([frame.head(1), frame.tail(3)], rechunk=False)
    assert pieces.n_chunks() > 1 and frame_digest(pieces) == frame_digest(frame)
    assert frame_digest(frame.clear()) != frame_digest(frame.clear().drop("tags"))


def test_cache_keys_refuse_frames_they_cannot_hash_by_content() -> None:
    """A pandas frame (or a lazy one) would be hashed by its truncated repr: refused."""
    import pandas as pd

    for frame in (pd.DataFrame({"x": [1]}), pd.Series([1]), pl.LazyFrame({"x": [1]})):
        with pytest.raises(TypeError, match=r"cannot hash .* into a cache key"):
            stage_key("gen", "1", {}, {"pool": frame})
    with pytest.raises(TypeError, match="needs a polars DataFrame"):
        frame_digest(pd.DataFrame({"x": [1]}))  # type: ignore[arg-type]
    series = pl.Series("x", [1, 2])
    assert stage_key("s", "1", {}, {"x": series}) != stage_key("s", "1", {}, {"x": series[:1]})


def test_shards_are_polars_frames_and_all_null_columns_concatenate(tmp_path: Path) -> None:
    import pandas as pd

    def compute(index: int, part: list[int]) -> pl.DataFrame:
        # shard 0 extracted no answer at all: its column is all null (the Null dtype)
        answers = [None] * len(part) if index == 0 else [str(i) for i in part]
        return pl.DataFrame({"item": part, "answer": answers})

    store = ShardStore(tmp_path / "s", "k")
    frame, _ = store.run(list(range(4)), 2, compute)
    expected = pl.DataFrame({"item": [0, 1, 2, 3], "answer": [None, None, "2", "3"]})
    assert_frame_equal(frame, expected)
    assert_frame_equal(store.run(list(range(4)), 2, compute)[0], expected)  # read back
    with pytest.raises(TypeError, match="shard 1: compute returned a pandas"):
        run_shards(None, [1, 2], 1, lambda i, part: (compute(i, part) if i == 0
                                                      else pd.DataFrame({"item": part})))


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
    atomic_write_parquet(pl.DataFrame({"a": [1, 2]}), path)
    before = path.read_bytes()

    def full_disk(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OutputWriteError) as err:
        atomic_write_parquet(pl.DataFrame({"a": [3]}), path)
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
    import dagster as dg

    from assets._stages import STAGE_FOLDER_KEY
    from tests.pipeline import by_name, checks_of, graph, resources

    overrides = {"chain_sum": {"grid": {"terms": [2, 3], "digits": [1, 1]},
                               "questions_per_cell": 2, "eval_questions_per_cell": 2,
                               "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
                               "strict_questions_per_cell": 2},
                 "sampling": {"n": 2, "max_new_tokens": 6}, "stages": {"shard_questions": 3},
                 "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    assets, checks = graph("demo", overrides)
    picked = [*by_name(assets, "chain_sum", "base"), *checks_of(checks, "chain_sum", "base")]

    def run() -> tuple[dict, list, list[str]]:
        instance = dg.DagsterInstance.ephemeral()
        result = dg.materialize(picked, instance=instance,
                                resources=resources(tmp_path / "out", "demo", overrides))
        meta = result.asset_materializations_for_node("chain_sum__eval__base")[0].metadata
        logs = [e.user_message for e in instance.all_logs(result.run_id)]
        return ({k: v.value for k, v in meta.items()}, result.get_asset_check_evaluations(),
                logs)

    first, evaluations, logs = run()
    assert (first["cache"], first["shards_total"], first["shards_computed"]) == ("miss", 2, 2)
    # the stage is the asset's own key (tests/infra/test_distinct_paths.py relies on it)
    # both as the page shows them: the folder in the output folder, the key in groups
    key, folder = digest_of(first["cache_key"]), first[STAGE_FOLDER_KEY]
    assert folder == "chain_sum__eval__base" and len(key) == 64
    assert (tmp_path / "out" / "stages" / folder / key).is_dir()
    assert len(evaluations) == 1 and evaluations[0].passed
    assert evaluations[0].metadata["expected_questions"].value == 4
    assert any(line.startswith("loading ") for line in logs)  # the first run loads the model
    second, evaluations, logs = run()
    assert second["cache"] == "hit" and second["shards_reused"] == 2
    assert second["shards_computed"] == 0 and second["cache_key"] == first["cache_key"]
    assert second["pass@1"] == first["pass@1"] and evaluations[0].passed
    assert not [line for line in logs if line.startswith("loading ")]  # a hit loads no model
