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


def markdown_table(frame: pl.DataFrame, max_rows: int = 20) -> dg.MetadataValue:
    """The first ``max_rows`` rows as a Markdown table (the UI renders it)."""
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
