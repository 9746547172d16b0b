"""Helpers that turn frames and figures into Dagster metadata and outputs."""

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from tabulate import tabulate

from resources.parquet_io import frame_data_version
from saturated_dag.experiments import Cell
from saturated_dag.reporting.result_tables import SUMMARY_CHARS


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


Format = str | Callable[[Any], str]
"""A column's display: a format spec (``".2f"``, ``"g"``) or a function of the value."""


def cell_text(value: Any, fmt: Format) -> str | None:
    """A number as a table shows it: ``fmt`` applied, ``None`` (an empty cell) for a null, and
    ``n/a`` for NaN (an undefined statistic, such as ρ on a question with constant scores)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return fmt(value) if callable(fmt) else format(value, fmt)


def frame_table(frame: pl.DataFrame, max_rows: int = 50, decimals: int = 2,
                formats: Mapping[str, Format] | None = None) -> dg.TableMetadataValue:
    """The first ``max_rows`` rows of a frame as a table the UI shows inline, text cut at
    ``TEXT_CHARS``.

    Floats are written as text with exactly ``decimals`` decimals (``91.80``, not the UI's
    ``91.8`` beside ``2``), or by their column's entry in ``formats`` (``"g"`` for a learning
    rate: ``2e-05``, which two decimals would show as ``0``). Why text: the UI prints a number
    with JavaScript's ``toString``, which drops trailing zeros; the column keeps its type in
    the table's schema, and the typed values are in the asset's Parquet."""
    head = frame.head(max_rows)
    formats = dict(formats or {})
    columns, cells = [], {}
    for name, dtype in head.schema.items():
        values = head[name].to_list()
        kind = ("float" if dtype.is_float() else "int" if dtype.is_integer()
                else _TYPES.get(type(dtype), "string"))
        if name in formats:
            values = [cell_text(v, formats[name]) for v in values]
        elif kind == "float":
            values = [cell_text(v, f".{decimals}f") for v in values]
        elif kind == "string":
            values = [None if v is None else _cut(str(v)) for v in values]
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


def output_file(path: str | Path, output_dir: str | Path) -> dg.MetadataValue:
    """A file the run wrote, as its path relative to the output folder (the ``output folder``
    entry of every stored frame; its ``parquet folder`` is relative to it too).

    Why relative: the UI's metadata panel leaves a value little width, and a browser breaks
    no line inside a path, so an absolute one makes the whole panel scroll sideways. A file
    outside the folder keeps its absolute path."""
    folder = Path(output_dir).expanduser().resolve()
    file = Path(path).expanduser().resolve()
    shown = file.relative_to(folder) if file.is_relative_to(folder) else file
    return dg.MetadataValue.path(str(shown))


def image(path: Path, caption: str) -> dg.MetadataValue:
    """A PNG in the UI (a data URI inside Markdown): one click away, behind the entry's "[Show
    Markdown]" link, since the UI shows Markdown inline only under 1,000 characters and no PNG
    is that small; the file itself (and an SVG beside it, ``plots.save_figure``) is on disk."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{caption}](data:image/png;base64,{data})")


def summary_entry(text: str) -> dg.MetadataValue:
    """An asset's answer as its first metadata entry (Markdown). Under the UI's inline limit
    (``result_tables.SUMMARY_CHARS``) it reads without a click; one over it is cut at its last
    whole paragraph that fits, so the answer's first line always shows inline."""
    if len(text) < SUMMARY_CHARS:
        return dg.MetadataValue.md(text)
    kept = ""
    for paragraph in text.split("\n\n"):
        longer = f"{kept}\n\n{paragraph}" if kept else paragraph
        if len(longer) + 2 >= SUMMARY_CHARS:
            break
        kept = longer
    return dg.MetadataValue.md((kept or text[:SUMMARY_CHARS - 2]) + " …")


def frame_output(frame: pl.DataFrame, metadata: dict[str, Any]) -> dg.Output[pl.DataFrame]:
    """The asset's frame with a content-hash data version.

    Why the content hash: a re-materialisation that reproduces the same frame (a stage-cache
    hit) keeps the same data version, so nothing downstream is marked stale by it.
    """
    return dg.Output(frame, metadata=metadata, data_version=frame_data_version(frame))


def eval_report_ins(task: str, experiments: Sequence[Cell]) -> dict[str, dg.AssetIn]:
    """The base model's eval report as input ``base`` and each experiment's as ``run_<i>``."""
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    ins.update({f"run_{i}": dg.AssetIn(key=[task, e.split, "eval", e.name])
                for i, e in enumerate(experiments)})
    return ins
