"""The experiment profile as a Dagster resource, with typed per-run overrides.

``ExperimentResource(location=ExperimentLocation(profile=..., output_dir=...), overrides=...)``:
the location names a shipped profile or a YAML file and the output folder, fixed for the code
location (not run config); ``overrides`` is a typed, nested Dagster config whose shape is the
profile's own (``{"sampling": {"n": 4}}``, ``{"policy": {"batch_size": 8}}``), so the launchpad
shows and checks every setting instead of taking a JSON string.

The override classes are generated from the core's pydantic models (``saturated_dag.config``),
never mirrored by hand, so a new profile field is overridable the moment it exists. Every
generated field is optional and ``None`` keeps the profile's value. Dagster's config system
cannot express three things the core models use, so the generator maps them:

* ``Literal["a", "b"]`` (Dagster accepts a bare ``Literal`` but not an optional one) becomes a
  string ``Enum`` with the same names; an integer ``Literal`` becomes ``int``, checked by the core;
* ``tuple[int, int]`` becomes ``list[int]``;
* a preset-or-model union (``grid: "D" | GridSpec``) becomes the model's fields plus ``preset``.

"Set this to null" cannot be told from "not set" in Dagster config, so the settings that may be
null (``chain_sum.strict_grid``, ``training.sweeps.dpo_beta``, ...) are cleared by naming them
in ``overrides.unset``. ``overrides_config`` turns a plain nested dict (``None`` leaves
included) into that form; ``resources.make_resources`` uses it.
"""

from __future__ import annotations

import enum
import multiprocessing
import os
import types
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import dagster as dg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from saturated_dag.config import Profile, ProfileError
from saturated_dag.infra import output_stamp
from saturated_dag.infra.lifeline import bind_to_parent, die_with
from saturated_dag.infra.parallel import limit_threads, step_layout
from saturated_dag.profiles import load_profile, merge_settings

_NONE = type(None)
_ENUMS: dict[tuple[str, ...], type[enum.Enum]] = {}
_CLASSES: dict[str, type[dg.Config]] = {}


class _Overrides(dg.Config):
    """Base of the generated classes: a misspelt key is an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


def _enum(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    """One Enum per set of choices (``dtype`` is shared by the policy and the judge)."""
    if values not in _ENUMS:
        _ENUMS[values] = enum.Enum(name, {v: v for v in values})  # type: ignore[misc]
    return _ENUMS[values]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _config_type(tp: Any, where: str) -> Any:
    """The Dagster-expressible type for a core annotation (without ``None``); ``where`` is
    ``Model.field``, for the names of generated enums and for errors."""
    origin = get_origin(tp)
    if origin is Annotated:  # a validated type (a registered scorer's name): its base type
        return _config_type(get_args(tp)[0], where)
    if origin is Literal:
        values = get_args(tp)
        if all(isinstance(v, str) for v in values):
            model, field = where.split(".")
            return _enum(model.removesuffix("Settings")
                         + "".join(p.title() for p in field.split("_")), values)
        if all(isinstance(v, int) for v in values):
            return int  # e.g. vllm.max_lora_rank; the core names the allowed values
    elif origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not _NONE]
        if len(args) == 1:
            return _config_type(args[0], where)
        models = [a for a in args if _is_model(a)]
        presets = [a for a in args if get_origin(a) is Literal]
        if len(models) == 1 and len(presets) == 1 and len(args) == 2:
            return _preset_or_model(models[0], _config_type(presets[0], where))
        if set(args) - set(presets) == {int} and len(presets) == 1:
            return str  # a number or a word (max_model_len: 8192 or auto); the core parses it
    elif origin in (list, tuple):
        items = {a for a in get_args(tp) if a is not Ellipsis}
        if len(items) == 1:
            return list[_config_type(items.pop(), where)]  # type: ignore[misc]
    elif origin is dict:  # keys as text (a method's name): the core validates them
        return dict[str, _config_type(get_args(tp)[1], where)]  # type: ignore[misc]
    elif _is_model(tp):
        return overrides_class(tp)
    elif tp in (str, int, float, bool):
        return tp
    raise TypeError(f"profile field {where}: no Dagster config type for {tp!r}; extend "
                    "resources/experiment.py's generator before adding such a field")


def _preset_or_model(model: type[BaseModel], presets: type[enum.Enum]) -> type[dg.Config]:
    name = f"{model.__name__}OrPresetOverrides"
    if name not in _CLASSES:
        base = overrides_class(model)
        _CLASSES[name] = create_model(  # type: ignore[call-overload]
            name, __base__=base, __doc__=f"Either a preset or a {model.__name__}.",
            preset=(presets | None, Field(None, description=f"one of {[p.value for p in presets]}"
                                          "; the other fields are ignored when it is set")))
    return _CLASSES[name]


def overrides_class(model: type[BaseModel], name: str | None = None) -> type[dg.Config]:
    """A ``dg.Config`` with every field of ``model``, each optional (``None``: keep)."""
    name = name or f"{model.__name__.removesuffix('Settings')}Overrides"
    if name not in _CLASSES:
        fields: dict[str, Any] = {}
        for field_name, info in model.model_fields.items():
            tp = _config_type(info.annotation, f"{model.__name__}.{field_name}")
            fields[field_name] = (tp | None, Field(None, description=info.description))
        _CLASSES[name] = create_model(  # type: ignore[call-overload]
            name, __base__=_Overrides, __doc__=f"Overrides of the profile's {model.__name__}; "
            "a field left empty keeps the profile's value.", **fields)
    return _CLASSES[name]


def _nullable_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted paths of the settings that may be null (``chain_sum.strict_grid``)."""
    found = []
    for name, info in model.model_fields.items():
        tp, path = info.annotation, f"{prefix}{name}"
        args = get_args(tp) if get_origin(tp) in (Union, types.UnionType) else ()
        if _NONE in args:
            found.append(path)
            # a nullable section's own nullable settings
            # (``training.sweeps.rrhf_variants.rank_weight``)
            for arg in args:
                if arg is not _NONE and _is_model(arg):
                    found += _nullable_paths(arg, f"{path}.")
        elif _is_model(tp):
            found += _nullable_paths(tp, f"{path}.")
    return found


NullableSetting = enum.Enum(  # type: ignore[misc]
    "NullableSetting", {p: p for p in _nullable_paths(Profile)})


class ProfileOverrides(overrides_class(Profile, "ProfileFieldOverrides")):  # type: ignore[misc]
    """Per-run changes to the profile: the profile's own shape, every field optional."""

    unset: list[NullableSetting] = Field(  # type: ignore[valid-type]
        default_factory=list, description="settings to set to null (e.g. chain_sum.strict_grid "
        "to skip the strict pool), which an empty field cannot say")


def _plain(value: Any) -> Any:
    """A generated config value as the profile's plain data (enums to strings, presets)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dg.Config):
        preset = getattr(value, "preset", None)
        if preset is not None:
            return preset.value
        return {k: _plain(v) for k, v in value if v is not None and k not in ("preset", "unset")}
    return value


def overrides_dict(overrides: ProfileOverrides | None) -> dict[str, Any]:
    """The nested dict ``load_profile`` merges into the profile (``None``: nothing)."""
    if overrides is None:
        return {}
    data = _plain(overrides)
    for path in overrides.unset:
        *parents, leaf = path.value.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = None
    return data


def _config_form(value: Any, path: str, unset: list[str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is None:
                unset.append(f"{path}{key}")
            else:
                out[key] = _config_form(item, f"{path}{key}.", unset)
        return out
    if isinstance(value, tuple | list):
        return [_config_form(v, path, unset) for v in value]
    return value


def _presets_as_fields(value: Any, cls: Any) -> Any:
    """A plain string where the config has a preset-or-model class: ``{"preset": "D"}``."""
    if not isinstance(value, dict) or not (isinstance(cls, type) and issubclass(cls, dg.Config)):
        return value
    out = {}
    for key, item in value.items():
        info = cls.model_fields.get(key)
        target = _config_class_of(info.annotation) if info is not None else None
        if isinstance(item, str) and target is not None and "preset" in target.model_fields:
            out[key] = {"preset": item}
        else:
            out[key] = _presets_as_fields(item, target)
    return out


def _config_class_of(tp: Any) -> type[dg.Config] | None:
    for arg in (tp, *get_args(tp)):
        if isinstance(arg, type) and issubclass(arg, dg.Config):
            return arg
    return None


def overrides_config(overrides: dict[str, Any] | None) -> dict[str, Any] | None:
    """A plain nested override dict as ``ExperimentResource.overrides`` run config.

    ``None`` leaves become ``unset`` entries and preset strings ``{"preset": ...}``; the result
    is validated against ``ProfileOverrides`` here, so a misspelt key fails with its name."""
    if not overrides:
        return None
    unset: list[str] = []
    data = _presets_as_fields(_config_form(overrides, "", unset), ProfileOverrides)
    if unset:
        data["unset"] = unset
    try:
        ProfileOverrides.model_validate(data)
    except ValidationError as err:
        raise ValueError(f"profile overrides {overrides!r}: {err}") from None
    return data


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
    overrides: ProfileOverrides | None = Field(  # type: ignore[valid-type]
        None, description="the location's own changes to the profile (tests' tiny models); "
        "a run's launch overrides are laid over them")

    @property
    def output_path(self) -> str:
        """The output folder as an absolute path, as runs record it."""
        return str(Path(self.output_dir).expanduser().resolve())

    def tags(self) -> dict[str, str]:
        return {PROFILE_TAG: self.profile, OUTPUT_DIR_TAG: self.output_path}

    def metadata(self) -> dict[str, str]:
        return {PROFILE_LABEL: self.profile, OUTPUT_DIR_LABEL: self.output_path}


class ExperimentResource(dg.ConfigurableResource):
    """The location's profile (``demo``, ``paper``, ``ci`` or a YAML file) and output folder,
    with typed per-run overrides of any of the profile's settings.

    Only ``overrides`` is run config; they are laid over the location's own, so a launch
    override changes exactly the settings it names. The settings are validated when the run
    starts (``setup_for_execution``), so a bad value (``sampling.n: 0``) fails the run before
    any step waits for the ``gpu`` pool, naming the setting.
    """

    location: ExperimentLocation = Field(
        description="profile and output folder of the code location (not run config)")
    overrides: ProfileOverrides | None = Field(  # type: ignore[valid-type]
        None, description="per-run changes to the profile, in its own shape")

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
        return layered_profile(self.profile, [
            ("the code location's overrides (ExperimentLocation.overrides)",
             overrides_dict(self.location.overrides)),
            ("this run's launch overrides (run config resources.experiment.config.overrides)",
             overrides_dict(self.overrides))])

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
