"""Where converted and built models are kept: one folder for every model source (a GGUF file
converted to transformers, a rehearsal model built with random weights)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Converted models live here (``SATURATED_DAG_CACHE``, default ``~/.cache/saturated_dag``)."""
    root = os.environ.get("SATURATED_DAG_CACHE") or Path.home() / ".cache" / "saturated_dag"
    return Path(root).expanduser()
