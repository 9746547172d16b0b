"""The experiment profile (task grids, sampling, thresholds) as a Dagster resource."""

import json
from functools import cached_property

import dagster as dg

from saturated_dag.config import Profile, load_profile


class ExperimentResource(dg.ConfigurableResource):
    """Which profile the run uses: ``demo``, ``paper`` or a path to a YAML profile.

    ``overrides_json`` is a JSON object merged into the profile (e.g.
    ``{"sampling": {"n": 4}}``), so one launchpad field changes any setting.
    """

    profile: str = "demo"
    overrides_json: str = "{}"
    output_dir: str = "outputs"

    @cached_property
    def settings(self) -> Profile:
        try:
            overrides = json.loads(self.overrides_json or "{}")
        except json.JSONDecodeError as err:
            raise dg.Failure(f"experiment.overrides_json is not JSON: {err}") from None
        if not isinstance(overrides, dict):
            raise dg.Failure("experiment.overrides_json must be a JSON object")
        return load_profile(self.profile, overrides)
