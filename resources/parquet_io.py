"""Stores DataFrame assets as Parquet files, written atomically.

``<base_dir>/<key>/<...>/<last segment>.parquet``, or ``<base_dir>/<key path>/<partition>.parquet``
for a partitioned asset (``asset_file``). The suffix is appended to the whole last segment:
experiment names carry numbers (``rrhf_self_judge_lambda0.01``, ``dpo_..._beta0.3_lr5e-06``),
and replacing "the suffix" after the last dot would give several assets one file.

Files written before this naming (``Path.with_suffix``) are not read: for a segment with a dot
the old file was shared by several assets, so its content cannot be attributed. Loading such an
asset names the old file and asks for a re-materialisation, which writes the new name.

A file is written beside its final name, fsynced and renamed (``saturated_dag.atomic``), so a
crash or a full disk never leaves a truncated file where the previous materialisation was; the
error names the path and the cause.
"""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pandas as pd

from saturated_dag.atomic import atomic_write_parquet

__all__ = ["SUFFIX", "ParquetIOManager", "asset_file", "atomic_write_parquet"]

SUFFIX = ".parquet"


def _plain_name(part: str, what: str) -> str:
    """A path component that stays one file or folder name: no separator, no ``.``/``..``."""
    if part in ("", ".", "..") or "/" in part or "\\" in part:
        raise ValueError(f"{what} {part!r} cannot name a file: it must be non-empty, not "
                         "'.' or '..', and contain no '/' or '\\'")
    return part


def asset_file(base_dir: str | Path, key_path: Sequence[str],
               partition: str | None = None) -> Path:
    """Where an asset (or one partition of it) is stored; distinct keys give distinct files.

    Every key segment is a folder except the last, which gets ``.parquet`` appended whole
    (never ``with_suffix``, which drops everything after a dot in ``lambda0.01``). A partitioned
    asset is a folder named by its whole key, one ``<partition>.parquet`` per partition.
    """
    if not key_path:
        raise ValueError("an asset key needs at least one segment")
    parts = [_plain_name(p, "asset key segment") for p in key_path]
    root = Path(base_dir).expanduser()
    if partition is None:
        return root.joinpath(*parts[:-1], parts[-1] + SUFFIX)
    return root.joinpath(*parts, _plain_name(partition, "partition key") + SUFFIX)


def _legacy_file(base_dir: str | Path, key_path: Sequence[str]) -> Path:
    """The name ``with_suffix`` gave before: only used to explain a missing file."""
    return Path(base_dir).expanduser().joinpath(*key_path).with_suffix(SUFFIX)


class ParquetIOManager(dg.ConfigurableIOManager):
    """DataFrames in, DataFrames out; the file path goes into the asset's metadata."""

    base_dir: str

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        partition = context.asset_partition_key if context.has_asset_partitions else None
        return asset_file(self.base_dir, context.asset_key.path, partition)

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()} must return a DataFrame, "
                            f"got {type(obj).__name__}")
        path = self._path(context)
        atomic_write_parquet(obj, path)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path)),
                                     "rows": len(obj)})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        path = self._path(context)
        if not path.is_file():
            name = context.asset_key.to_user_string()
            old = _legacy_file(self.base_dir, context.asset_key.path)
            hint = "materialise it first"
            if not context.has_asset_partitions and old != path and old.is_file():
                hint = (f"{old} is from the old file naming, which several assets shared, so "
                        f"it is not read: re-materialise {name} to write {path.name}")
            raise FileNotFoundError(f"{name} has no stored output at {path}: {hint}")
        return pd.read_parquet(path)
