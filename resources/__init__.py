"""Dagster resources: the experiment profile, the inference engines, Parquet storage.

``make_resources`` builds the resource dict of the code location (``definitions.py``) and of
the tests. Training through Dagster Pipes is ``resources.training.train_with_pipes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resources.experiment import ExperimentResource, ProfileOverrides, overrides_config
from resources.inference import InferenceResource
from resources.parquet_io import ParquetIOManager


def make_resources(profile: str, output_dir: str,
                   overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """``experiment``, ``inference`` and ``parquet_io`` for a profile and an output folder.

    ``overrides`` is a plain nested dict merged into the profile (``{"policy": {"model": path,
    "batch_size": 8}}``; ``None`` values clear a setting). ``experiment`` is configured at
    launch (``configure_at_launch``) with these values as its defaults, and ``inference`` holds
    that same object, so config given in the launchpad reaches both: a fully built
    ``ExperimentResource`` nested in another resource would not see launch-time config. Use
    ``dg.build_resources(make_resources(...))`` for live instances outside a run.
    """
    experiment = ExperimentResource.configure_at_launch(
        profile=profile, output_dir=output_dir, overrides=overrides_config(overrides))
    return {
        "experiment": experiment,
        "inference": InferenceResource(experiment=experiment),
        "parquet_io": ParquetIOManager(base_dir=str(Path(output_dir) / "assets")),
    }


__all__ = ["ExperimentResource", "InferenceResource", "ParquetIOManager", "ProfileOverrides",
           "make_resources"]
