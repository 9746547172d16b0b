"""The experiment profile as a Dagster resource, with per-run overrides.

``ExperimentResource(location=ExperimentLocation(profile=..., output_dir=...), overrides=...)``:
the location names a shipped profile or a YAML file and the output folder, fixed for the code
location (not run config); ``overrides`` is run config in the profile's own nested shape
(``{"sampling": {"n": 4}}``, ``{"policy": {"batch_size": 8}}``, ``{"chain_sum": {"grid":
"D_prime", "strict_grid": null}}``).

Dagster checks only that the overrides are a mapping (a permissive config, ``dict[str, Any]``):
the profile's own pydantic model (``saturated_dag.config.Profile``) validates them when the run
starts (``setup_for_execution``), before any step, with one line per bad field naming the
setting, the value and the layer that set it (``layered_profile``): "this run's launch
overrides make profile 'demo' invalid: sampling.n = 0: ...". A misspelt key is such an error
(the models forbid extra fields), and a null leaf sets a nullable setting to null. Why not
config classes generated from the model: Dagster's config system cannot express several of its
types (optional ``Literal``s, tuples, preset-or-model unions), so a generated layer would have
to re-map them and re-validate, a second description of the profile beside the model.
"""

from __future__ import annotations

import multiprocessing
import os
from functools import cached_property
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from saturated_dag.config import Profile, ProfileError
from saturated_dag.experiments import TaskPlan, experiment_plan
from saturated_dag.infra import output_stamp
from saturated_dag.infra.lifeline import bind_to_parent, die_with
from saturated_dag.infra.parallel import limit_threads, step_layout
from saturated_dag.profiles import load_profile, merge_settings

Overrides = dict[str, Any]
"""Changes to a profile in its own nested shape; validated by ``Profile`` when laid over it."""


def layered_profile(profile: str, layers: list[tuple[str, dict[str, Any]]]) -> Profile:
    """The profile with each named layer of overrides merged in turn, validated after each.

    Why layer by layer: a value out of range fails the merged profile, and the error must
    name where the value came from. Checked this way, a bad launch override (``sampling.n:
    0`` in the launchpad) is blamed on the run's overrides, with the value it set, and not on
    the profile file, which is valid on its own."""
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = merge_settings(merged, layer)
    try:
        return load_profile(profile, merged)
    except ProfileError:
        pass
    load_profile(profile)  # a bad file is the file's own error, as load_profile words it
    merged = {}
    for label, layer in layers:  # the first layer after which the profile fails
        merged = merge_settings(merged, layer)
        try:
            load_profile(profile, merged)
        except ProfileError as err:
            raise ProfileError(_blame(str(err), label, profile, layer)) from None
    raise AssertionError("unreachable: the merged profile failed but no layer did")


def _blame(message: str, label: str, profile: str, layer: dict[str, Any]) -> str:
    """``load_profile``'s message re-addressed to the overrides: the file's line replaced by
    the layer's name, each failing setting shown with the value the layer gave it."""
    lines = message.splitlines()[1:] or [message]
    shown = []
    for line in lines:
        path, _, reason = line.strip().partition(": ")
        value = _lookup(layer, path.split("."))
        shown.append(f"  {path} = {value!r}: {reason}" if value is not _MISSING else line)
    return (f"{label} make profile {profile!r} invalid (the profile alone is valid):\n"
            + "\n".join(shown))


_MISSING = object()


def _lookup(data: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


PROFILE_TAG = "saturated_dag/profile"
OUTPUT_DIR_TAG = "saturated_dag/output_dir"
PROFILE_LABEL = "profile"
OUTPUT_DIR_LABEL = "output folder"
"""The same two as a stored frame's metadata: plain words, which the UI's key column can wrap
(a tag name cannot hold a space)."""


class ExperimentLocation(dg.ConfigurableResource):
    """The profile and output folder a code location serves, and its own overrides.

    Set once where the resources are built (``definitions.py`` from ``SATURATED_DAG_PROFILE``
    and ``SATURATED_DAG_OUTPUT_DIR``; tests through ``make_resources``) and nested, fully
    configured, in ``ExperimentResource`` and the Parquet IO manager, so Dagster keeps it out
    of run config: no launchpad, run.yaml or sensor can point one resource at another profile
    or folder than the rest. Every run records both as tags (``saturated_dag/profile``,
    ``saturated_dag/output_dir``) and every stored frame as metadata (``profile``,
    ``output folder``).
    """

    profile: str = Field(description="demo, paper, paper_instruct, ci or a YAML path")
    output_dir: str = Field(description="asset files, adapters, tables, stages")
    overrides: Overrides | None = Field(
        None, description="the location's own changes to the profile (tests' tiny models), in "
        "its nested shape; a run's launch overrides are laid over them")

    @property
    def output_path(self) -> str:
        """The output folder as an absolute path, as runs record it."""
        return str(Path(self.output_dir).expanduser().resolve())

    @property
    def key_prefix(self) -> list[str]:
        """The parts every asset key of this location starts with (``Profile.key_prefix``):
        the IO manager lays files out by the key after them."""
        return load_profile(self.profile, self.overrides or {}).key_prefix_parts()

    def tags(self) -> dict[str, str]:
        return {PROFILE_TAG: self.profile, OUTPUT_DIR_TAG: self.output_path}

    def metadata(self) -> dict[str, str]:
        return {PROFILE_LABEL: self.profile, OUTPUT_DIR_LABEL: self.output_path}


class ExperimentResource(dg.ConfigurableResource):
    """The location's profile (``demo``, ``paper``, ``ci`` or a YAML file) and output folder,
    with per-run overrides of any of the profile's settings.

    Only ``overrides`` is run config; they are laid over the location's own, so a launch
    override changes exactly the settings it names. The settings are validated when the run
    starts (``setup_for_execution``), so a bad value (``sampling.n: 0``) fails the run before
    any step waits for the gpu concurrency limit, naming the setting.
    """

    location: ExperimentLocation = Field(
        description="profile and output folder of the code location (not run config)")
    overrides: Overrides | None = Field(
        None, description="per-run changes to the profile, in its own nested shape "
        "({\"sampling\": {\"n\": 4}}); checked by the profile's model when the run starts, "
        "each bad setting named")

    @property
    def profile(self) -> str:
        return self.location.profile

    @property
    def output_dir(self) -> str:
        return self.location.output_dir

    @cached_property
    def settings(self) -> Profile:
        """The validated profile with the overrides merged in (a bad value names its field)."""
        # a launch override changes only what it names (nested sections merge)
        settings = layered_profile(self.profile, [
            ("the code location's overrides (ExperimentLocation.overrides)",
             self.location.overrides or {}),
            ("this run's launch overrides (run config resources.experiment.config.overrides)",
             self.overrides or {})])
        if settings.key_prefix_parts() != self.location.key_prefix:
            raise ProfileError(
                f"this run's launch overrides set key_prefix to {settings.key_prefix!r}: it "
                "names the code location's asset keys, which are fixed when the location "
                f"loads ({'/'.join(self.location.key_prefix) or 'no prefix'}); set it in the "
                "profile file instead")
        return settings

    @cached_property
    def plan(self) -> dict[str, TaskPlan]:
        """The run's plan (``experiments.experiment_plan`` of ``settings``), resolved once per
        run: what a step's body reads of the cells, adapters and their keys and of the task's
        questions. The graph is the code location's plan; ``assets.selection.same_adapters``
        refuses a step whose run's plan trains other adapters than the graph holds (a launch
        override of the selection or the seeds)."""
        return experiment_plan(self.settings)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Validate the settings, hold the step to its layout's torch threads
        (``saturated_dag.infra.parallel``), and tag the run with the profile and folder it uses."""
        settings = self.settings  # raises naming the setting, before any step runs
        layout = step_layout(settings)
        if layout.threads is not None:  # never more threads than the layout's cores
            limit_threads(layout.threads)
        if layout.processes == "per_step":
            run_process = multiprocessing.parent_process()
            if run_process is not None and run_process.pid is not None:
                # A step process of the multiprocess executor, whose OS parent is the fork
                # server, not the run: it dies with either (the kernel's parent-death signal
                # for the server, a watcher thread for the run).
                bind_to_parent(os.getppid())
                die_with(run_process.pid)
        run = context.dagster_run
        if context.log is not None:
            context.log.info(f"profile {settings.name!r} ({self.profile}), outputs in "
                             f"{self.location.output_path}")
        # no profile reads another profile's files (saturated_dag.infra.output_stamp)
        try:
            changed = output_stamp.claim(self.location.output_path, self.profile,
                                         settings.model_dump())
        except output_stamp.OutputFolderInUse as err:
            raise dg.Failure(str(err)) from None
        if changed and context.log is not None:
            context.log.warning(
                f"settings changed since this folder's last run ({len(changed)}): "
                + "; ".join(changed[:10]) + ". Stages recompute what they change; an asset "
                "this run does not materialise still holds the earlier settings' data")
        if run is None or context.instance is None:
            return
        tags = self.location.tags()
        clash = {k: run.tags[k] for k in tags if k in run.tags and run.tags[k] != tags[k]}
        if clash:
            raise ValueError(
                f"run {run.run_id} is tagged {clash}, but this code location serves profile "
                f"{self.profile!r} with outputs in {self.location.output_path}: the profile "
                "and folder come from SATURATED_DAG_PROFILE and SATURATED_DAG_OUTPUT_DIR of "
                "the code location, not from run tags or run config")
        missing = {k: v for k, v in tags.items() if k not in run.tags}
        if missing:
            context.instance.add_run_tags(run.run_id, missing)
