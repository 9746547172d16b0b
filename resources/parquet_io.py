"""Stores polars DataFrame assets as Parquet, written atomically and checked against a schema.

Base: a ``ConfigurableIOManager`` delegating to Dagster's own ``UPathIOManager`` (the pattern of
``FilesystemIOManager``), not ``dagster-polars``, whose releases lag the pinned Dagster, fail to
load frames under polars 2 and write in place, so a crash can leave a truncated file.

Paths (``asset_file``): ``<base_dir>/<key>/<...>/<last segment>.parquet``, a partitioned asset a
folder with one ``<partition>.parquet`` per partition; the suffix is appended to the whole last
segment, since names carry dots (``rrhf_self_judge_lambda0.01``). A file of the former
``with_suffix`` naming is refused, naming it and asking for a re-materialisation. The folder is
``<output_dir>/assets`` of the ``ExperimentLocation``, local only (the atomic rename needs one
filesystem); each materialisation records ``profile``, ``output folder``, ``parquet folder``
(relative: an absolute path is wider than the UI's metadata panel) and ``parquet file``.

Writes are atomic (``atomic_write_parquet``) and checked against the schema the asset declares
(``metadata=schema_metadata("<kind>")``; none is refused). Fan-in: an input annotated
``dict[str, pl.DataFrame]`` gets a frame per mapped partition; a ``pl.DataFrame`` input is
refused when several are mapped. ``frame_data_version`` is an asset's data version. Reads are
verified twice: against the content hash in the file's own metadata (``check_parquet_proof``)
and against the instance's record of the latest materialisation (row count, ``content hash``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_origin

import dagster as dg
import polars as pl
from pydantic import Field, PrivateAttr
from upath import UPath

from resources.experiment import ExperimentLocation
from saturated_dag.infra.atomic import atomic_write_parquet, check_parquet_proof
from saturated_dag.infra.shards import digest_of, frame_digest, readable_digest
from saturated_dag.schemas import check_frame, get_schema

__all__ = ["FILE_KEY", "FOLDER_KEY", "REPORT_KEY", "SCHEMA_KEY", "SUFFIX", "ParquetIOManager",
           "asset_file", "atomic_write_parquet",
           "frame_data_version", "latest_metadata", "schema_metadata", "table_schema"]

SUFFIX = ".parquet"
SCHEMA_KEY = "frame schema"
"""Definition metadata key naming an asset's frame schema (``saturated_dag.schemas``)."""
REPORT_KEY = "report page"
"""Definition metadata of a report asset: its columns are not drawn above its answer."""
FOLDER_KEY = "parquet folder"
FILE_KEY = "parquet file"
"""Materialisation metadata: where the frame is, ``<output folder>/<parquet folder>/<parquet
file>``."""
CONTENT_KEY = "content hash"
"""Materialisation metadata: the written frame's content hash, checked on every read.
Definition and materialisation keys are plain words, not ``saturated_dag/...``: the UI's key
column is as wide as the longest unbroken word of any key, and that width is taken from the
values beside it."""
OLD_CONTENT_KEY = "saturated_dag/content_hash"
"""The same, as materialisations before 2026-11-28 recorded it: still checked on a read."""


def _plain_name(part: str, what: str) -> str:
    """A path component that stays one file or folder name: no separator, no ``.``/``..``."""
    if part in ("", ".", "..") or "/" in part or "\\" in part:
        raise ValueError(f"{what} {part!r} cannot name a file: it must be non-empty, not "
                         "'.' or '..', and contain no '/' or '\\'")
    return part


def _key_parts(key_path: Sequence[str]) -> list[str]:
    """The key's segments, each checked to be one plain file or folder name."""
    if not key_path:
        raise ValueError("an asset key needs at least one segment")
    return [_plain_name(p, "asset key segment") for p in key_path]


def asset_file(base_dir: str | Path, key_path: Sequence[str],
               partition: str | None = None) -> Path:
    """Where an asset (or one partition of it) is stored; distinct keys give distinct files.

    Every key segment is a folder except the last, which gets ``.parquet`` appended whole
    (never ``with_suffix``, which drops everything after a dot in ``lambda0.01``). A partitioned
    asset is a folder named by its whole key, one ``<partition>.parquet`` per partition.
    """
    parts = _key_parts(key_path)
    root = Path(base_dir).expanduser()
    if partition is None:
        return root.joinpath(*parts[:-1], parts[-1] + SUFFIX)
    return root.joinpath(*parts, _plain_name(partition, "partition key") + SUFFIX)


def _wants_dict(annotation: Any) -> bool:
    """An input annotated ``dict[...]``/``Mapping[...]``: fan-in partitions as a dict."""
    origin = get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _legacy_file(base_dir: str | Path, key_path: Sequence[str]) -> Path:
    """The name ``with_suffix`` gave before: only used to explain a missing file."""
    return Path(base_dir).expanduser().joinpath(*key_path).with_suffix(SUFFIX)


def table_schema(columns: Mapping[str, Any]) -> dg.TableSchema:
    """A Dagster table schema of polars columns (name -> dtype), in order."""
    return dg.TableSchema(columns=[dg.TableColumn(name=name, type=str(dtype))
                                   for name, dtype in columns.items()])


def schema_metadata(name: str, report: bool = False) -> dict[str, Any]:
    """Definition metadata declaring an asset's frame schema: ``@dg.asset(metadata=...)``.

    The IO manager checks every write against it; the UI shows the declared columns (a
    parameter such as ``pass@{k}`` as written in the declaration).

    ``report``: a table a researcher reads for its answer (results, sweeps, behaviour,
    agreement, selection, runs table). Dagster's asset page draws a canonical
    ``dagster/column_schema`` as a "Columns" section above all metadata, which pushes the
    answer far below the first screen; a report's columns are recorded instead as its last
    materialisation entry, ``columns`` (``REPORT_KEY``), below its summary, figure and tables.
    """
    declared = get_schema(name)
    if report:
        return {SCHEMA_KEY: name, REPORT_KEY: True}
    return {SCHEMA_KEY: name,
            "dagster/column_schema": dg.MetadataValue.table_schema(
                table_schema(dict(declared.columns)))}


def frame_data_version(frame: pl.DataFrame) -> dg.DataVersion:
    """The frame's content hash as a Dagster data version (``dg.Output(data_version=...)``).

    ``saturated_dag.infra.shards.frame_digest``, the hash the stage caches key on: column names and
    order, dtypes, height and every value, through their Python values (not polars' own row
    hashes, which may change between polars versions); the same in every process and
    independent of chunking. An unchanged re-materialisation reports the same version, so
    nothing downstream turns stale.
    """
    return dg.DataVersion(frame_digest(frame))


def latest_metadata(instance: dg.DagsterInstance, asset_key: dg.AssetKey,
                    partitions: Sequence[str] | None = None) -> dict[str, Any] | None:
    """The metadata of the asset's (or those partitions') latest materialisation (``None``:
    none recorded)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=partitions), limit=1)
    if not records.records:
        return None
    materialization = records.records[0].asset_materialization
    return None if materialization is None else dict(materialization.metadata)


def _recorded(context: dg.InputContext, file: Path) -> dict[str, Any] | None:
    """The metadata of the materialisation that wrote ``file`` last (``None``: none known)."""
    instance = context.instance if context.step_context is not None else None
    if instance is None:
        return None
    partitions = None
    if context.has_asset_partitions:
        partitions = [p for p in context.asset_partition_keys if file.name == p + SUFFIX]
    return latest_metadata(instance, context.asset_key, partitions)


def _verify_recorded(context: dg.InputContext, file: Path, frame: pl.DataFrame,
                     content_hash: str | None = None) -> None:
    """Refuse a file whose content (``frame``, hashing to ``content_hash`` when the caller
    has computed it) is not what its latest materialisation wrote."""
    recorded = _recorded(context, file)
    key = next((k for k in (CONTENT_KEY, OLD_CONTENT_KEY) if recorded and k in recorded), None)
    if key is None:
        return
    name = context.asset_key.to_user_string()
    rows = getattr(recorded.get("dagster/row_count"), "value", None)
    fix = (f"it was changed outside Dagster; re-materialise {name} (or restore the file) "
           "before reading it")
    if rows is not None and rows != frame.height:
        raise ValueError(f"{file} has {frame.height} rows but the materialisation of {name} "
                         f"that wrote it recorded {rows}: {fix}")
    wrote = digest_of(recorded[key].value)
    content_hash = content_hash or frame_digest(frame)
    if wrote != content_hash:
        raise ValueError(f"{file} differs from what the materialisation of {name} wrote "
                         f"(content hash {content_hash[:12]}, recorded "
                         f"{wrote[:12]}): {fix}")


def _declared_schema(context: dg.OutputContext, name: str) -> str:
    value = context.definition_metadata.get(SCHEMA_KEY)
    value = getattr(value, "value", value)  # a TextMetadataValue once normalised
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"{name} declares no frame schema, so the Parquet IO manager does not store it: add "
            f"metadata=schema_metadata('<kind>') (resources.parquet_io) to its definition, with a "
            "kind declared in saturated_dag/schemas.py")
    return value


def partition_entry(context: dg.OutputContext, partition: str | None) -> dict[str, str]:
    """Whose entries these are, for a partitioned asset (one partition per data draw): the
    asset's Overview shows the partition materialised last, and no draw is a choice, so the
    entry says which partition the entries are and that each partition's page holds its own."""
    if partition is None:
        return {}
    count = len(context.asset_partitions_def.get_partition_keys())
    return {"partition": f"{partition}, one of {count} (the Overview shows the partition "
                         "materialised last, not a choice; each partition's page holds its "
                         "own)"}


class PolarsParquetStore(dg.UPathIOManager):
    """The ``UPathIOManager`` behind ``ParquetIOManager``: polars frames, ``asset_file`` paths."""

    extension = None  # ``asset_file`` names every file, suffix included

    def __init__(self, base_dir: str, run_metadata: Mapping[str, str] | None = None,
                 key_prefix: Sequence[str] = ()):
        self.base_dir = base_dir
        self.run_metadata = dict(run_metadata or {})
        self.key_prefix = list(key_prefix)
        super().__init__(base_path=UPath(Path(base_dir).expanduser()))

    def file_key(self, context: dg.InputContext | dg.OutputContext) -> list[str]:
        """The asset's key after the location's prefix (``Profile.key_prefix``): what its
        file is named by, so a profile's output folder has one layout with or without a
        prefix. A key of another prefix is refused: it is not this location's asset."""
        key = list(context.asset_key.path)
        if key[:len(self.key_prefix)] != self.key_prefix:
            raise ValueError(f"{context.asset_key.to_user_string()} is not an asset of this "
                             f"location, whose keys start with {'/'.join(self.key_prefix)}/")
        return key[len(self.key_prefix):]

    def get_asset_relative_path(self, context: dg.InputContext | dg.OutputContext) -> UPath:
        key = self.file_key(context)
        if context.has_asset_partitions:  # the key's folder; ``get_path_for_partition`` names
            return UPath(*_key_parts(key))  # its files
        return UPath(asset_file(".", key))

    def get_path_for_partition(self, context: dg.InputContext | dg.OutputContext,
                               path: UPath, partition: str) -> UPath:
        return UPath(asset_file(self.base_dir, self.file_key(context), partition))

    def get_op_output_relative_path(self, context: dg.InputContext | dg.OutputContext) -> UPath:
        raise TypeError(f"the Parquet IO manager stores assets only; op output "
                        f"{'/'.join(context.get_identifier())} has no asset key")

    def dump_to_path(self, context: dg.OutputContext, obj: Any, path: UPath) -> None:
        self._dump(context, obj, Path(path), None)

    def _dump(self, context: dg.OutputContext, obj: Any, path: Path,
              content_hash: str | None) -> None:
        """Check ``obj`` against its declared schema, then write it with its content hash."""
        name = context.asset_key.to_user_string()
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{name} must return a polars DataFrame, got "
                            f"{type(obj).__module__}.{type(obj).__name__}")
        kind = _declared_schema(context, name)
        try:
            check_frame(obj, kind)
        except ValueError as err:
            raise ValueError(f"{name}: {err}; nothing was written") from err
        atomic_write_parquet(obj, path, content_hash)

    def get_metadata(self, context: dg.OutputContext, obj: Any,
                     content_hash: str | None = None) -> dict[str, dg.MetadataValue]:
        columns = dg.MetadataValue.table_schema(table_schema(obj.schema))
        report = bool(context.definition_metadata.get(REPORT_KEY))
        content_hash = content_hash or frame_digest(obj)
        return {"dagster/row_count": dg.MetadataValue.int(obj.height),
                **({} if report else {"dagster/column_schema": columns}),
                CONTENT_KEY: dg.MetadataValue.text(readable_digest(content_hash)),
                **{k: dg.MetadataValue.text(v) for k, v in self.run_metadata.items()},
                **({"columns": columns} if report else {})}  # a report's answer comes first

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """UPathIOManager's write (one file per asset or partition, at ``asset_file``), with the
        file recorded as two short entries, its folder relative to the output folder and its
        name, instead of one absolute ``path``. Why not ``get_metadata``: ``path`` is set before
        it and cannot be taken back, and a browser breaks no line inside a path, so one like
        ``.../assets/chain_sum/hard/selection/dpo_correctness_random.parquet`` is wider than
        the UI's metadata panel and makes the page scroll sideways."""
        partitions = context.asset_partition_keys if context.has_asset_partitions else [None]
        if len(partitions) != 1:
            raise ValueError(f"{context.asset_key.to_user_string()}: one run writes one "
                             f"partition, not {len(partitions)}: launch the backfill with a "
                             "multi-run policy")
        file = asset_file(self.base_dir, self.file_key(context), partitions[0])
        file.parent.mkdir(parents=True, exist_ok=True)
        context.log.debug(f"writing {file}")
        content_hash = frame_digest(obj) if isinstance(obj, pl.DataFrame) else None
        self._dump(context, obj, file, content_hash)  # the hash once, for file and record
        folder = os.path.relpath(file.parent, Path(self.base_dir).expanduser().parent)
        context.add_output_metadata({**partition_entry(context, partitions[0]),
                                     FOLDER_KEY: dg.MetadataValue.path(folder),
                                     FILE_KEY: dg.MetadataValue.path(file.name),
                                     **self.get_metadata(context, obj, content_hash)})

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pl.DataFrame:
        file = Path(path)
        if not file.is_file():
            name = context.asset_key.to_user_string()
            hint = "materialise it first"
            if context.has_asset_partitions:
                raise FileNotFoundError(f"{name} has no stored partition at {file}: {hint}")
            old = _legacy_file(self.base_dir, self.file_key(context))
            if old != file and old.is_file():
                hint = (f"{old} is from the old file naming, which several assets shared, so "
                        f"it is not read: re-materialise {name} to write {file.name}")
            raise FileNotFoundError(f"{name} has no stored output at {file}: {hint}")
        try:
            frame = pl.read_parquet(file)
        except (OSError, pl.exceptions.PolarsError) as err:  # truncated, not Parquet, ...
            raise OSError(f"{context.asset_key.to_user_string()}: its stored file {file} "
                          f"cannot be read ({type(err).__name__}: {err}); it is damaged: "
                          "re-materialise the asset") from None
        content_hash = frame_digest(frame)
        _verify_recorded(context, file, frame, content_hash)
        name = context.asset_key.to_user_string()
        check_parquet_proof(file, frame, f"re-materialise {name} (or restore the file as its "
                            "run wrote it) before reading it", content_hash)
        return frame

    def load_partitions(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        loaded = super().load_partitions(context)
        wanted = context.dagster_type.typing_type
        if isinstance(loaded, pl.DataFrame) and _wants_dict(wanted):
            return {context.asset_partition_keys[0]: loaded}
        if isinstance(loaded, dict) and wanted is pl.DataFrame:
            raise TypeError(
                f"input {context.name!r} maps to {len(context.asset_partition_keys)} partitions "
                f"of {context.asset_key.to_user_string()}, which load as one frame each: "
                "annotate it dict[str, pl.DataFrame]")
        return loaded


class ParquetIOManager(dg.ConfigurableIOManager):
    """polars DataFrames in and out, as Parquet under ``<output_dir>/assets`` of the location.

    The folder comes from the nested ``ExperimentLocation``, the same one ``ExperimentResource``
    holds, so it is not run config: a run cannot store its frames in another folder than its
    adapters, tables and stage caches. Each materialisation records the profile and folder.
    """

    location: ExperimentLocation = Field(
        description="profile and output folder of the code location (not run config)")

    _run_store: PolarsParquetStore | None = PrivateAttr(None)

    @property
    def base_dir(self) -> str:
        return str(Path(self.location.output_dir) / "assets")

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # the key prefix comes from the location's profile: read it once per run, not once
        # per frame stored or loaded
        self._run_store = self._new_store()

    def _new_store(self) -> PolarsParquetStore:
        return PolarsParquetStore(self.base_dir, self.location.metadata(),
                                  self.location.key_prefix)

    def _store(self) -> PolarsParquetStore:
        """The run's store; a manager used outside a run (a test calling it directly) makes
        one per call."""
        return self._run_store if self._run_store is not None else self._new_store()

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        self._store().handle_output(context, obj)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        return self._store().load_input(context)
