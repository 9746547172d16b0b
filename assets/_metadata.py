"""Helpers that turn tables and figures into Dagster metadata."""

import base64
from pathlib import Path

import dagster as dg
import pandas as pd


def markdown_table(frame: pd.DataFrame, max_rows: int = 20) -> dg.MetadataValue:
    return dg.MetadataValue.md(frame.head(max_rows).to_markdown(index=False))


def image(path: Path, caption: str) -> dg.MetadataValue:
    """A PNG shown inline in the UI (a data URI inside Markdown)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{caption}](data:image/png;base64,{data})")
