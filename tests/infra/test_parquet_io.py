"""Issue 14.1: one storage layer. polars frames stored as Parquet by a ``UPathIOManager``, at
``asset_file``'s paths, written atomically, checked against the schema each asset declares
(``saturated_dag.schemas``), one file per partition with fan-in, content-hash data versions,
and preference datasets that ``datasets.load_dataset("parquet", ...)`` reads.
"""

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from resources import ExperimentLocation, ParquetIOManager
from resources.parquet_io import (
    FILE_KEY,
    FOLDER_KEY,
    SCHEMA_KEY,
    asset_file,
    frame_data_version,
    schema_metadata,
    table_schema,
)
from saturated_dag.experiments import sweeps
from saturated_dag.infra.atomic import OutputWriteError, atomic_write_csv, atomic_write_parquet
from saturated_dag.profiles import available_profiles, load_profile
from saturated_dag.schemas import (
    SCHEMAS,
    SWEEP_SETTINGS,
    check_frame,
    schema,
    sweep_schema_name,
)
from tests.conftest import REPO_ROOT as REPO
from tests.scoring_data import eval_report

KINDS = ["generation_pool", "difficulty_partitions", "entropy_scores", "self_judge_scores",
         "strong_judge_scores", "random_scores", "scorer_agreement", "dpo_pairs", "rrhf_groups",
         "raft_set", "sft_set", "correctness_pairs", "eval_report", "results_table"]


def _sft(qid: str = "q1", n: int = 2) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [qid] * n, "sample_index": list(range(n)),
                         "prompt": ["p"] * n, "completion": [f"c{i}" for i in range(n)]},
                        schema=schema("sft_set"))


def _pairs() -> pl.DataFrame:
    return pl.DataFrame({"question_id": ["q1", "q2"], "prompt": ["1+1=", "2+2="],
                         "chosen": ["2", "4"], "chosen_sample": [0, 3], "chosen_score": [0.9, 1.0],
                         "rejected": ["3", "5"], "rejected_sample": [1, 2],
                         "rejected_score": [0.1, None]}, schema=schema("dpo_pairs"))


def _asset(key: list[str], frame: pl.DataFrame, kind: str | None = "sft_set",
           **kwargs: Any) -> dg.AssetsDefinition:
    @dg.asset(key=key, io_manager_key="parquet_io",
              metadata=schema_metadata(kind) if kind else None, **kwargs)
    def _write() -> pl.DataFrame:
        return frame

    return _write


def _manager(out: Path) -> ParquetIOManager:
    """The IO manager of a location whose output folder is ``out``: files under out/assets."""
    return ParquetIOManager(location=ExperimentLocation(profile="demo", output_dir=str(out)))


def _materialize(assets: list, out: Path, **kwargs: Any) -> dg.ExecuteInProcessResult:
    return dg.materialize(assets, resources={"parquet_io": _manager(out)},
                          raise_on_error=False, **kwargs)


def _metadata(result: dg.ExecuteInProcessResult, key: list[str]) -> dict[str, Any]:
    (event,) = [m for m in result.get_asset_materialization_events()
                if m.asset_key == dg.AssetKey(key)]
    return dict(event.materialization.metadata)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    (event,) = [e for e in result.all_events if e.is_step_failure]
    error = event.step_failure_data.error
    messages = []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    return "\n".join(messages)


# --- paths, metadata, atomic writes ------------------------------------------------------------

def test_the_io_manager_writes_where_asset_file_says_with_row_count_and_schema(
        tmp_path: Path) -> None:
    key = ["t", "eval", "x_lambda0.01"]
    report = eval_report({"a": (8, 8), "b": (8, 3), "c": (8, 0)}, cell="1x1")
    result = _materialize([_asset(key, report, "eval_report")], tmp_path)
    assert result.success
    path = asset_file(tmp_path / "assets", key)
    assert path == tmp_path / "assets" / "t" / "eval" / "x_lambda0.01.parquet" and path.is_file()
    assert_frame_equal(pl.read_parquet(path), report)
    meta = _metadata(result, key)
    # two short entries, the folder relative to the output folder (a path is too wide a word)
    assert meta[FOLDER_KEY] == dg.MetadataValue.path("assets/t/eval")
    assert meta[FILE_KEY] == dg.MetadataValue.path("x_lambda0.01.parquet")
    assert tmp_path / meta[FOLDER_KEY].value / meta[FILE_KEY].value == path
    assert "path" not in meta  # UPathIOManager's absolute one is not recorded
    assert meta["dagster/row_count"] == dg.MetadataValue.int(24)
    columns = meta["dagster/column_schema"].schema.columns
    assert [(c.name, c.type) for c in columns] == [
        (name, str(dtype)) for name, dtype in schema("eval_report").items()]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary left


def test_a_partitioned_asset_writes_one_file_per_partition_at_asset_files_path(
        tmp_path: Path) -> None:
    parts = dg.StaticPartitionsDefinition(["0.5", "1e-05", "b"])

    @dg.asset(key=["t", "scores"], partitions_def=parts, io_manager_key="parquet_io",
              metadata=schema_metadata("sft_set"))
    def scores(context: dg.AssetExecutionContext) -> pl.DataFrame:
        return _sft(context.partition_key, n=int(context.partition_key == "b") + 1)

    for partition in parts.get_partition_keys():
        result = _materialize([scores], tmp_path, partition_key=partition)
        assert result.success
        path = asset_file(tmp_path / "assets", ["t", "scores"], partition)
        recorded = _metadata(result, ["t", "scores"])
        assert tmp_path / recorded[FOLDER_KEY].value / recorded[FILE_KEY].value == path
        assert pl.read_parquet(path)["question_id"].unique().to_list() == [partition]
        # the Overview shows the partition materialised last: its entries say whose they are
        assert recorded["partition"].value.startswith(f"{partition}, one of 3 (the Overview")
    assert "partition" not in meta_of_unpartitioned(tmp_path)
    assert sorted(p.name for p in (tmp_path / "assets" / "t" / "scores").iterdir()) == [
        "0.5.parquet", "1e-05.parquet", "b.parquet"]


def meta_of_unpartitioned(tmp_path: Path) -> dict:
    """An unpartitioned asset's recorded metadata (it names no partition)."""
    key = ["t", "one"]
    result = _materialize([_asset(key, _sft("q"), "sft_set")], tmp_path / "one")
    return _metadata(result, key)


def test_fan_in_gives_a_dict_of_partitions_and_refuses_a_single_frame_annotation(
        tmp_path: Path) -> None:
    parts = dg.StaticPartitionsDefinition(["x", "y", "z"])
    up_key = ["t", "pool"]

    @dg.asset(key=up_key, partitions_def=parts, io_manager_key="parquet_io",
              metadata=schema_metadata("sft_set"))
    def pool(context: dg.AssetExecutionContext) -> pl.DataFrame:
        return _sft(context.partition_key, n=2)

    @dg.asset(key=["t", "merged"], io_manager_key="parquet_io", ins={"parts": dg.AssetIn(up_key)},
              metadata=schema_metadata("sft_set"))
    def merged(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
        assert list(parts) == ["x", "y", "z"]
        return pl.concat(parts.values())

    @dg.asset(key=["t", "one"], io_manager_key="parquet_io", metadata=schema_metadata("sft_set"),
              ins={"parts": dg.AssetIn(up_key, partition_mapping=dg.StaticPartitionMapping(
                  {"y": "only"}))}, partitions_def=dg.StaticPartitionsDefinition(["only"]))
    def one(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
        assert list(parts) == ["y"]  # a dict even for one mapped partition
        return parts["y"]

    @dg.asset(key=["t", "wrong"], io_manager_key="parquet_io", ins={"parts": dg.AssetIn(up_key)},
              metadata=schema_metadata("sft_set"))
    def wrong(parts: pl.DataFrame) -> pl.DataFrame:
        return parts

    for partition in parts.get_partition_keys():
        assert _materialize([pool], tmp_path, partition_key=partition).success
    assert _materialize([pool, merged], tmp_path, selection=[merged]).success
    stored = pl.read_parquet(asset_file(tmp_path / "assets", ["t", "merged"]))
    assert stored["question_id"].to_list() == ["x", "x", "y", "y", "z", "z"]
    assert _materialize([pool, one], tmp_path, selection=[one], partition_key="only").success
    message = _failure(_materialize([pool, wrong], tmp_path, selection=[wrong]))
    assert "maps to 3 partitions of t/pool" in message and "dict[str, pl.DataFrame]" in message


def test_a_missing_partition_names_its_file(tmp_path: Path) -> None:
    parts = dg.StaticPartitionsDefinition(["x", "y"])

    @dg.asset(key=["t", "pool"], partitions_def=parts, io_manager_key="parquet_io",
              metadata=schema_metadata("sft_set"))
    def pool() -> pl.DataFrame:
        return _sft()

    @dg.asset(key=["t", "all"], io_manager_key="parquet_io", ins={"p": dg.AssetIn(["t", "pool"])},
              metadata=schema_metadata("sft_set"))
    def merged(p: dict[str, pl.DataFrame]) -> pl.DataFrame:
        return pl.concat(p.values())

    assert _materialize([pool], tmp_path, partition_key="x").success
    message = _failure(_materialize([pool, merged], tmp_path, selection=[merged]))
    missing = asset_file(tmp_path / "assets", ["t", "pool"], "y")
    assert f"t/pool has no stored partition at {missing}: materialise it first" in message


def test_a_failed_write_keeps_the_previous_file_and_says_why(tmp_path: Path) -> None:
    """A real write error (file size limit) inside ``atomic_write_parquet``: polars would wrap
    it in a ComputeError; serialising first keeps the OSError and its clear message."""
    path = tmp_path / "t.parquet"
    atomic_write_parquet(_sft(n=1), path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import resource, signal, sys
        import polars as pl
        from saturated_dag.infra.atomic import OutputWriteError, atomic_write_parquet
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        big = pl.DataFrame({{"x": [str(i) * 50 for i in range(200_000)]}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
        try:
            atomic_write_parquet(big, {str(path)!r})
        except OutputWriteError as err:
            print(err)
            sys.exit(0)
        sys.exit("no OutputWriteError")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"could not write {path}" in run.stdout and "file size limit" in run.stdout
    assert "EFBIG" in run.stdout and "left intact" in run.stdout
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_atomic_writers_take_polars_frames_and_refuse_pandas(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    pd = pytest.importorskip("pandas")
    with pytest.raises(TypeError, match=r"atomic_write_parquet needs a polars DataFrame, got "
                                        r"pandas.*pl\.from_pandas"):
        atomic_write_parquet(pd.DataFrame({"a": [1]}), tmp_path / "a.parquet")
    with pytest.raises(TypeError, match="atomic_write_csv needs a polars DataFrame"):
        atomic_write_csv(pd.DataFrame({"a": [1]}), tmp_path / "a.csv")
    frame = pl.DataFrame({"a": [1, None], "b": ["x", "y"]})
    atomic_write_csv(frame, tmp_path / "a.csv")
    assert (tmp_path / "a.csv").read_text() == "a,b\n1,x\n,y\n"

    def full_disk(*_a: Any, **_k: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    atomic_write_parquet(frame, tmp_path / "a.parquet")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OutputWriteError, match="disk is full"):
        atomic_write_parquet(frame.head(1), tmp_path / "a.parquet")
    monkeypatch.undo()
    assert_frame_equal(pl.read_parquet(tmp_path / "a.parquet"), frame)


def test_a_file_from_the_old_naming_is_named_in_the_error(tmp_path: Path) -> None:
    old = tmp_path / "assets" / "t" / "eval" / "x_lambda0.parquet"
    atomic_write_parquet(_sft(), old)
    manager = _manager(tmp_path)
    with dg.build_input_context(asset_key=dg.AssetKey(["t", "eval", "x_lambda0.01"])) as context, \
            pytest.raises(FileNotFoundError) as err:
        manager.load_input(context)
    assert str(old) in str(err.value) and "old file naming" in str(err.value)


# --- schemas on write --------------------------------------------------------------------------

def test_a_frame_that_differs_from_its_schema_is_refused_and_the_old_file_kept(
        tmp_path: Path) -> None:
    key = ["t", "saturated", "dpo_pairs", "random"]
    assert _materialize([_asset(key, _pairs(), "dpo_pairs")], tmp_path).success
    before = asset_file(tmp_path / "assets", key).read_bytes()
    # an all-None score column, as pandas wrote it for the random hard-split pairs
    bad = _pairs().with_columns(pl.lit(None).alias("rejected_score"))
    message = _failure(_materialize([_asset(key, bad, "dpo_pairs")], tmp_path))
    assert "t/saturated/dpo_pairs/random: dpo_pairs frame does not match its declared schema" \
        in message
    assert "column 'rejected_score' has dtype Null, expected Float64" in message
    assert "nothing was written" in message
    assert asset_file(tmp_path / "assets", key).read_bytes() == before


def test_an_asset_without_a_declared_schema_is_refused(tmp_path: Path) -> None:
    message = _failure(_materialize([_asset(["t", "x"], _sft(), kind=None)], tmp_path))
    assert "t/x declares no frame schema" in message and "schema_metadata(" in message
    assert not asset_file(tmp_path / "assets", ["t", "x"]).exists()


def test_a_non_polars_output_is_refused(tmp_path: Path) -> None:
    @dg.asset(key=["t", "x"], io_manager_key="parquet_io", metadata=schema_metadata("sft_set"))
    def rows() -> list:
        return [1, 2]

    assert "t/x must return a polars DataFrame, got builtins.list" in _failure(
        _materialize([rows], tmp_path))


def test_schema_metadata_declares_the_kind_and_its_columns() -> None:
    meta = schema_metadata("results_table")
    assert meta[SCHEMA_KEY] == "results_table"
    names = [c.name for c in meta["dagster/column_schema"].schema.columns]
    assert names == ["split", "method", "scorer", "pass@1", "pass@{k}", "Δ pass@1",
                     "Δ pass@{k}", *INTERVAL_COLUMNS, "eval_set"]
    with pytest.raises(ValueError, match=r"no frame schema is declared for 'dpo_pair'; "
                                         r"declared: generation_pool, "):
        schema_metadata("dpo_pair")


def test_a_report_records_its_columns_after_its_answer(tmp_path: Path) -> None:
    """A report asset declares no canonical column schema (the UI would draw it above the
    answer); its materialisation lists the written columns last, as ``columns``."""
    from resources.parquet_io import REPORT_KEY

    declared = schema_metadata("results_table", report=True)
    assert declared == {SCHEMA_KEY: "results_table", REPORT_KEY: True}
    key = ["t", "eval", "x"]
    report = eval_report({"a": (8, 8)}, cell="1x1")

    @dg.asset(key=key, io_manager_key="io", metadata=schema_metadata("eval_report", report=True))
    def table() -> dg.Output[pl.DataFrame]:
        return dg.Output(report, metadata={"summary": "the answer"})

    result = dg.materialize([table], resources={"io": ParquetIOManager(
        location=ExperimentLocation(profile="demo", output_dir=str(tmp_path)))})
    meta = _metadata(result, key)
    assert "dagster/column_schema" not in meta
    keys = list(meta)
    assert keys[0] == "summary" and keys[-1] == "columns", keys
    assert [c.name for c in meta["columns"].schema.columns] == list(schema("eval_report"))
    assert table_schema(pl.Schema({"a": pl.Int64})) == dg.TableSchema(
        columns=[dg.TableColumn("a", "Int64")])


def test_every_asset_kind_is_declared_with_natural_dtypes() -> None:
    assert set(KINDS) <= set(SCHEMAS)
    allowed = {pl.String(), pl.Int64(), pl.Float64(), pl.Boolean()}
    for kind in SCHEMAS:
        for name, dtype in schema(kind, k=8).items():
            assert dtype in allowed, (kind, name, dtype)
    assert schema("generation_pool")["correct"] == pl.Boolean()
    assert list(schema("sft_set")) == list(schema("raft_set"))


@pytest.mark.parametrize("profile", available_profiles())
def test_the_sweep_schemas_have_each_sweeps_setting_columns(profile: str) -> None:
    """``SWEEP_SETTINGS`` against the settings ``experiments.sweeps`` puts in each row."""
    for sweep, rows in sweeps(load_profile(profile).training).items():
        declared = [name for name, _ in SWEEP_SETTINGS[sweep]]
        for row in rows:
            assert list(row.settings) == declared, (profile, sweep, row.settings)
        columns = list(schema(sweep_schema_name(sweep), k=8))
        assert columns[2:2 + len(declared)] == declared
        assert columns[2 + len(declared):] == [
            "epochs", "adapter", "pass@1", "pass@8", "Δ pass@1", "Δ pass@8",
            *(c.replace("{k}", "8") for c in INTERVAL_COLUMNS), "eval_set"]
    with pytest.raises(ValueError, match="unknown sweep 'lr'"):
        sweep_schema_name("lr")


INTERVAL_COLUMNS = [
    *(f"{m} {end}" for m in ("pass@1", "pass@{k}", "Δ pass@1", "Δ pass@{k}")
      for end in ("low", "high")),
    "Δ pass@1 excludes 0", "Δ pass@{k} excludes 0",
    "Δ pass@1 p", "Δ pass@1 Holm p", "Δ pass@{k} p", "Δ pass@{k} Holm p",
    "questions", "replicates", "training replicates", "data seeds"]


def _results(k: int) -> pl.DataFrame:
    frame = pl.DataFrame({"split": ["-", "hard"], "method": ["Base model", "SFT"],
                          "scorer": ["", ""], "pass@1": [10.0, 12.5], f"pass@{k}": [40.0, 45.0],
                          "Δ pass@1": [0.0, 2.5], f"Δ pass@{k}": [0.0, 5.0]})
    for template in INTERVAL_COLUMNS:
        column = template.replace("{k}", str(k))
        if column in frame.columns:  # k = 1: the pass@k columns are the pass@1 ones
            continue
        values = ([False, True] if column.endswith("excludes 0") else
                  [96, 96] if column == "questions"
                  else [1, 1] if column in ("replicates", "training replicates", "data seeds")
                  else [0.0, 1.0])
        frame = frame.with_columns(pl.Series(column, values))
    return frame.with_columns(eval_set=pl.lit("chain_sum"))


def test_check_frame_names_every_difference() -> None:
    check_frame(_sft(), "sft_set")
    check_frame(pl.DataFrame(schema=schema("dpo_pairs")), "dpo_pairs")  # empty, with columns
    bad = _sft().rename({"prompt": "promt"}).with_columns(pl.col("sample_index").cast(pl.Int32))
    with pytest.raises(ValueError) as err:
        check_frame(bad, "sft_set")
    text = str(err.value)
    assert text.startswith("sft_set frame does not match its declared schema")
    assert "missing column 'prompt' (String)" in text and "extra column 'promt' (String)" in text
    assert "column 'sample_index' has dtype Int32, expected Int64" in text
    with pytest.raises(ValueError, match=r"columns in another order: expected \['question_id', "
                                         r"'sample_index', 'prompt', 'completion'\], got"):
        check_frame(_sft().select("sample_index", "question_id", "prompt", "completion"),
                    "sft_set")
    with pytest.raises(ValueError, match="no frame schema is declared for 'sft'"):
        check_frame(_sft(), "sft")
    with pytest.raises(TypeError, match="sft_set must be a polars DataFrame"):
        check_frame(_sft().to_pandas(), "sft_set")


def test_check_frame_reads_k_from_the_tables_own_columns() -> None:
    for k in (4, 8, 16):
        check_frame(_results(k), "results_table")
        check_frame(_results(k), "results_table", k=k)
    with pytest.raises(ValueError, match=r"missing column 'pass@8'.*extra column 'pass@4'"):
        check_frame(_results(4), "results_table", k=8)
    mixed = _results(8).rename({"Δ pass@8": "Δ pass@4"})
    with pytest.raises(ValueError, match=r"more than one value of k = 4, 8"):
        check_frame(mixed, "results_table")
    with pytest.raises(ValueError, match=r"missing column 'pass@8' \(Float64\)"):
        check_frame(_results(8).drop("pass@8"), "results_table")
    # n = 1: pass@k is pass@1, the table has it once (no templated column: k = 1)
    check_frame(_results(1), "results_table")
    single = _results(1)
    check_frame(single, "results_table", k=1)
    assert list(schema("results_table", k=1)) == list(single.columns)
    with pytest.raises(ValueError, match="the results_table schema needs k"):
        schema("results_table")


# --- data versions -----------------------------------------------------------------------------

_VERSION_SCRIPT = """
import polars as pl
from resources.parquet_io import frame_data_version
frame = pl.DataFrame({"q": ["a", None, "c"], "n": [1, 2, None], "x": [0.1, float("nan"), -0.0],
                      "ok": [True, False, None]})
print(frame_data_version(frame).value)
"""


def test_frame_data_version_is_stable_across_processes_and_follows_content() -> None:
    runs = {subprocess.run([sys.executable, "-c", _VERSION_SCRIPT], capture_output=True,
                           text=True, cwd=REPO, timeout=120, check=True).stdout.strip()
            for _ in range(2)}
    frame = pl.DataFrame({"q": ["a", None, "c"], "n": [1, 2, None],
                          "x": [0.1, float("nan"), -0.0], "ok": [True, False, None]})
    version = frame_data_version(frame)
    assert runs == {version.value} and len(version.value) == 64
    # chunking is not content: two chunks read back equal to one
    chunked = pl.concat([frame.head(1), frame.tail(2)], rechunk=False)
    assert chunked.n_chunks() == 2 and frame_data_version(chunked) == version
    changed = [
        frame.with_columns(pl.when(pl.int_range(3) == 2).then(0.2).otherwise(pl.col("x"))
                           .alias("x")),                       # one cell
        frame.with_columns(pl.col("x").fill_nan(None)),        # NaN -> null
        frame.with_columns(pl.col("n").fill_null(0)),          # null -> 0
        frame.select("n", "q", "x", "ok"),                     # column order
        frame.with_columns(pl.col("n").cast(pl.Int32)),        # dtype
        frame.rename({"ok": "good"}),                          # a name
        frame.head(2),                                         # a row
    ]
    versions = [frame_data_version(f) for f in changed]
    assert version not in versions and len(set(versions)) == len(versions)


# --- datasets ----------------------------------------------------------------------------------

def test_a_stored_preference_dataset_loads_with_datasets(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    key = ["chain_sum", "saturated", "dpo_pairs", "self_judge"]
    assert _materialize([_asset(key, _pairs(), "dpo_pairs")], tmp_path).success
    loaded = datasets.load_dataset("parquet", data_files=str(asset_file(tmp_path / "assets", key)),
                                   split="train", cache_dir=str(tmp_path / "hf"))
    assert loaded.column_names == list(schema("dpo_pairs"))
    assert_frame_equal(pl.from_arrow(loaded.data.table), _pairs())
    assert loaded[1]["rejected_score"] is None and loaded[0]["chosen"] == "2"


def test_a_hash_recorded_under_the_old_key_or_in_groups_is_still_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Materialisations before the plain-word keys recorded ``saturated_dag/content_hash`` as
    one word; today's record it in groups of 16 digits. A read checks both forms."""
    import resources.parquet_io as parquet_io
    from saturated_dag.infra.shards import frame_digest, readable_digest

    frame = pl.DataFrame({"a": [1, 2]})
    context = SimpleNamespace(asset_key=dg.AssetKey(["t", "x"]))
    file = tmp_path / "x.parquet"
    for key, digest in ((parquet_io.OLD_CONTENT_KEY, frame_digest(frame)),
                        (parquet_io.CONTENT_KEY, readable_digest(frame_digest(frame)))):
        monkeypatch.setattr(parquet_io, "_recorded", lambda *_, k=key, d=digest: {
            k: dg.MetadataValue.text(d)})
        parquet_io._verify_recorded(context, file, frame)  # the same content: read
        with pytest.raises(ValueError, match="differs from what the materialisation"):
            parquet_io._verify_recorded(context, file, frame.with_columns(pl.col("a") + 1))
