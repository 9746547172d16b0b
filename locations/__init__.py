"""Extra code locations of ``workspace.yaml``: the testbed's and the study's graphs, beside
``definitions.py``'s (the demo), so the UI that README starts shows the runs of all three
README commands over one instance.

Each is the whole graph of its profile (``jobs.location.build_defs``, as ``definitions.py``
builds the demo's), whose keys start with the profile's ``key_prefix`` (``testbed/...``,
``study/...``): Dagster holds one definition per asset key in a deployment, and the three
profiles' runs share ``DAGSTER_HOME``. A workspace entry cannot set environment variables, so
each location reads its profile and output folder from variables of its own, with the
defaults its run script uses.
"""

from __future__ import annotations

import os

import dagster as dg

from jobs.location import build_defs
from saturated_dag.profiles import load_profile


def extra_location(name: str, output_dir: str) -> dg.Definitions:
    """The location ``name`` (``testbed``, ``study``): profile ``SATURATED_DAG_<NAME>_PROFILE``
    (default ``name``) writing under ``SATURATED_DAG_<NAME>_OUTPUT_DIR`` (default
    ``output_dir``). Its nightly schedule starts stopped: re-evaluating every adapter of the
    testbed or the study each night is a deliberate choice (the demo's runs by default)."""
    variable = f"SATURATED_DAG_{name.upper()}_PROFILE"
    profile = os.environ.get(variable, name)
    if load_profile(profile).key_prefix is None:
        raise ValueError(f"{variable}={profile!r}: the profile has no key_prefix, so its "
                         "asset keys would be the demo's in the same instance; give it one "
                         "(saturated_dag/profiles/testbed.yaml has `key_prefix: testbed`)")
    return build_defs(profile,
                      os.environ.get(f"SATURATED_DAG_{name.upper()}_OUTPUT_DIR", output_dir),
                      nightly_status=dg.DefaultScheduleStatus.STOPPED)
