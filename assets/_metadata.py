"""Helpers that turn frames and figures into Dagster metadata and outputs."""

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from tabulate import tabulate

from resources.parquet_io import frame_data_version
from saturated_dag.experiments import Experiment


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
               descriptions: dict[str, str] | None = None) -> dg.TableMetadataValue:
    """Rows of text (``result_tables.display_rows``) as a table the UI shows inline.

    Why text columns: a value and its interval read as one cell (``36.98 [33.10, 40.20]``),
    with its two decimals kept; the typed numbers are in the asset's Parquet and CSV."""
    descriptions = descriptions or {}
    schema = dg.TableSchema(columns=[dg.TableColumn(h, "string", description=descriptions.get(h))
                                     for h in headers])
    records = [dg.TableRecord({h: ("" if v is None else str(v))
                               for h, v in zip(headers, row, strict=True)}) for row in rows]
    return dg.MetadataValue.table(records=records, schema=schema)


_TYPES = {pl.Boolean: "bool", pl.String: "string", pl.Categorical: "string"}


TEXT_CHARS = 160
"""A text cell longer than this is cut (a completion or a prompt in a preview)."""


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"


def frame_table(frame: pl.DataFrame, max_rows: int = 50, decimals: int = 2
                ) -> dg.TableMetadataValue:
    """The first ``max_rows`` rows of a frame as a typed table the UI shows inline, floats
    rounded to ``decimals`` (the frames' percentages have two), text cut at ``TEXT_CHARS``."""
    head = frame.head(max_rows)
    columns, cells = [], {}
    for name, dtype in head.schema.items():
        if dtype.is_float():
            kind, values = "float", [None if v is None else round(v, decimals)
                                     for v in head[name].to_list()]
        elif dtype.is_integer():
            kind, values = "int", head[name].to_list()
        else:
            kind = _TYPES.get(type(dtype), "string")
            values = head[name].to_list() if kind == "bool" else [
                None if v is None else _cut(str(v)) for v in head[name].to_list()]
        columns.append(dg.TableColumn(name, kind))
        cells[name] = values
    records = [dg.TableRecord(dict(zip(cells, row, strict=True)))
               for row in zip(*cells.values(), strict=True)]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=columns))


def markdown_table(frame: pl.DataFrame, max_rows: int = 20) -> dg.MetadataValue:
    """The first ``max_rows`` rows as a Markdown table: for previews of raw rows, which the UI
    keeps behind a "[Show Markdown]" link once over 1,000 characters, so their long ids and
    texts do not widen the page's metadata (the science tables are ``frame_table``)."""
    head = frame.head(max_rows)
    return dg.MetadataValue.md(tabulate(head.rows(), headers=head.columns, tablefmt="pipe"))


def image(path: Path, caption: str) -> dg.MetadataValue:
    """A PNG shown inline in the UI (a data URI inside Markdown)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{caption}](data:image/png;base64,{data})")


def frame_output(frame: pl.DataFrame, metadata: dict[str, Any]) -> dg.Output[pl.DataFrame]:
    """The asset's frame with a content-hash data version.

    Why the content hash: a re-materialisation that reproduces the same frame (a stage-cache
    hit) keeps the same data version, so nothing downstream is marked stale by it.
    """
    return dg.Output(frame, metadata=metadata, data_version=frame_data_version(frame))


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out a matplotlib figure, write it atomically as a 110 dpi PNG and close it."""
    import matplotlib.pyplot as plt

    from saturated_dag.atomic import atomic_save_figure

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def eval_report_ins(task: str, experiments: Sequence[Experiment]) -> dict[str, dg.AssetIn]:
    """The base model's eval report as input ``base`` and each experiment's as ``run_<i>``."""
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    ins.update({f"run_{i}": dg.AssetIn(key=[task, e.split, "eval", e.name])
                for i, e in enumerate(experiments)})
    return ins
