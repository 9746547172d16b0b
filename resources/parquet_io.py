"""Stores DataFrame assets as Parquet files, written atomically.

``<base_dir>/<asset key path>.parquet`` (one file per partition under a folder when
partitioned). A file is written beside its final name, fsynced and renamed
(``saturated_dag.atomic``), so a crash or a full disk never leaves a truncated file where the
previous materialisation was; the error names the path and the cause.
"""

from pathlib import Path

import dagster as dg
import pandas as pd

from saturated_dag.atomic import atomic_write_parquet

__all__ = ["ParquetIOManager", "atomic_write_parquet"]


class ParquetIOManager(dg.ConfigurableIOManager):
    """DataFrames in, DataFrames out; the file path goes into the asset's metadata."""

    base_dir: str

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        path = Path(self.base_dir).expanduser().joinpath(*context.asset_key.path)
        if context.has_asset_partitions:
            return path / f"{context.asset_partition_key}.parquet"
        return path.with_suffix(".parquet")

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
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()} has no stored output at {path}: "
                "materialise it first"
            )
        return pd.read_parquet(path)
