"""The ``testbed`` code location of ``workspace.yaml``: the calibrated testbed's own assets
(group ``testbed``: ``chain_sum/testbed_validation``, its verdicts, table and figure), on the
``testbed`` profile and its output folder, so the UI that README starts shows the testbed's
latest results beside the demo's.

Why a second location and not the testbed profile's whole graph: ``scripts/run_testbed.sh``
records its runs in the same instance (``DAGSTER_HOME``) as the demo, and a Dagster
deployment allows one definition per asset key; the testbed profile's pool, scores and
adapters have the demo's keys, so this location defines only the assets no other location
does, and depends on the rest (``base_model``) across locations. Its profile and folder:
``SATURATED_DAG_TESTBED_PROFILE`` (default ``testbed``) and
``SATURATED_DAG_TESTBED_OUTPUT_DIR`` (default ``outputs/testbed``, run_testbed.sh's), read
here because a workspace entry cannot set environment variables per location.
"""

from __future__ import annotations

import os

import dagster as dg

from assets import profile_assets
from jobs.executor import step_executor
from resources import make_resources
from saturated_dag.profiles import load_profile

GROUP = "testbed"
"""The asset group that only the testbed's profile defines."""


def build_view(profile_name: str, output_dir: str) -> dg.Definitions:
    """The testbed's own assets (group ``GROUP``) on ``profile_name``, writing under
    ``output_dir``, with that profile's resources and step executor."""
    profile = load_profile(profile_name)
    assets, _ = profile_assets(profile)
    own = [a for a in assets if isinstance(a, dg.AssetsDefinition)
           and set(a.group_names_by_key.values()) == {GROUP}]
    if not own:
        raise ValueError(f"profile {profile_name!r} defines no {GROUP!r} asset: set "
                         "SATURATED_DAG_TESTBED_PROFILE to a profile with a testbed section")
    # the analysis reads its cells' eval reports, the base model's report, the agreement
    # table and the selections as inputs: here they are external assets loaded by the same
    # IO manager from the testbed's folder (the testbed job materialises them), each with its
    # partitions in the profile's graph (one per data seed for the agreement table and the
    # difficulty partitions), so the analysis reads every draw
    mine = {k for a in own for k in a.keys}
    inputs = sorted({dep.asset_key for a in own for spec in a.specs for dep in spec.deps
                     if dep.asset_key not in mine}, key=lambda k: k.to_user_string())
    partitions = {spec.key: spec.partitions_def for a in assets
                  if isinstance(a, dg.AssetsDefinition) for spec in a.specs}
    external = [dg.AssetSpec(key, partitions_def=partitions.get(key)).with_io_manager_key(
        "parquet_io") for key in inputs]
    return dg.Definitions(assets=[*own, *external],
                          resources=make_resources(profile_name, output_dir),
                          executor=step_executor(profile))


defs = build_view(os.environ.get("SATURATED_DAG_TESTBED_PROFILE", "testbed"),
                  os.environ.get("SATURATED_DAG_TESTBED_OUTPUT_DIR", "outputs/testbed"))
