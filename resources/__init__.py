"""Dagster resources: the experiment profile, the inference engines, Parquet storage.

``make_resources`` builds the resource dict of the code location (``definitions.py``) and of
the tests. Training through Dagster Pipes is ``resources.training.train_with_pipes``.
Building the resources (``make_resources``, which every code location and test calls) installs
``resources.pool_wait``'s corrections of Dagster's pool wait; importing the package changes
nothing.
"""

from __future__ import annotations

from typing import Any

from resources import pool_wait
from resources.experiment import ExperimentLocation, ExperimentResource, Overrides
from resources.inference import InferenceResource
from resources.parquet_io import ParquetIOManager


def make_resources(profile: str, output_dir: str,
                   overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """``experiment``, ``inference`` and ``parquet_io`` for a profile and an output folder.

    The profile, the folder and ``overrides`` (a plain nested dict merged into the profile:
    ``{"policy": {"model": path, "batch_size": 8}}``; ``None`` values clear a setting) form one
    ``ExperimentLocation``, nested fully configured in ``experiment`` and ``parquet_io``, so no
    run config can change them. ``experiment`` is configured at launch
    (``configure_at_launch``): its only run config is ``overrides``, laid over the location's.
    ``inference`` holds that same partial object, so launch config reaches both: a fully built
    ``ExperimentResource`` nested in another resource would not see it. Use
    ``dg.build_resources(make_resources(...))`` for live instances outside a run.
    """
    # A step blocked by the gpu concurrency limit names the run holding the slot and sleeps
    # between claim checks instead of spinning a core (Dagster 1.13's busy wait;
    # resources/pool_wait.py). Installed here, where the definitions' resources are built, so
    # every code location, run worker and test that builds them gets it, and an import alone
    # changes nothing.
    pool_wait.install()
    location = ExperimentLocation(profile=profile, output_dir=output_dir,
                                  overrides=overrides or None)
    experiment = ExperimentResource.configure_at_launch(location=location)
    return {
        "experiment": experiment,
        "inference": InferenceResource(experiment=experiment),
        "parquet_io": ParquetIOManager(location=location),
    }


__all__ = [
    "ExperimentLocation",
    "ExperimentResource",
    "InferenceResource",
    "Overrides",
    "ParquetIOManager",
    "make_resources",
]
