"""The one ``Definitions`` of the saturated-dag code location.

The active profile comes from ``SATURATED_DAG_PROFILE`` (``demo`` by default; ``paper``, ``ci``
or a path to a YAML file) and is validated here, so a bad profile fails at load time, before any
model is touched. Outputs go under ``SATURATED_DAG_OUTPUT_DIR`` (default ``outputs``).

Every job, including the implicit one behind a UI materialisation or a sensor's run, uses the
profile's ``step_executor`` (``jobs/executor.py``): the run's own process, so a run loads the
policy once for all its steps, unless a CPU profile asks for one model step per core
(``execution.model_steps: one_per_core``). ``jobs.location.build_defs`` builds it, as it
builds the Kubernetes deployment's (``deploy/k8s/k8s_definitions.py``).
"""

from __future__ import annotations

from jobs.location import build_defs, location_from_environment

PROFILE, OUTPUT_DIR = location_from_environment()

defs = build_defs(PROFILE, OUTPUT_DIR)
