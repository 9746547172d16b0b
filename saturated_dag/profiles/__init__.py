"""The shipped profiles (the YAML files beside this module) and how a profile is loaded: read,
laid over the profile it ``extends``, merged with overrides, validated by the ``Profile`` model
(``saturated_dag.config``), and checked against the plan it makes (``experiments``: no row may
train an adapter equal to the base model). Every profile reaches the code through
``load_profile`` or ``parse_profile``, so every one is checked alike.

Why here and not in ``config``: the plan check needs the plan, which is built from the
settings; the settings cannot import their own plan without a circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from saturated_dag.config import Profile, ProfileError
from saturated_dag.experiments import check_trainable

PROFILE_DIR = Path(__file__).parent
"""The shipped profiles, one YAML file each."""


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def merge_settings(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base`` key by key: nested sections merge, other values replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_settings(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(err: ValidationError, source: str) -> str:
    lines = [f"invalid profile {source}:"]
    for item in err.errors():
        field = ".".join(str(p) for p in item["loc"])
        if field:
            lines.append(f"  {field}: {item['msg']} (got {item.get('input')!r})")
        else:  # a whole-profile rule: its message names the fields involved
            lines.append(f"  {item['msg']}")
    return "\n".join(lines)


def parse_profile(data: dict[str, Any], source: str = "<dict>") -> Profile:
    """``data`` as a ``Profile``, or a ``ProfileError`` naming ``source`` and every field at
    fault; then the plan check: a row whose adapter cannot move (σ-RRHF, no SFT term, λ = 0)
    is refused by name."""
    try:
        profile = Profile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(_describe(err, source)) from None
    try:
        check_trainable(profile.training, profile.sampling.n)
    except ValueError as err:
        raise ProfileError(f"invalid profile {source}:\n  {err}") from None
    return profile


_REMOTE_CODE_SECTIONS: tuple[tuple[str, ...], ...] = (("policy",), ("judges", "strong"))
"""The settings whose ``trust_remote_code`` runs a model repository's own Python code."""
_BOOL = TypeAdapter(bool)


def _section(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data if isinstance(data, dict) else {}


def _file_allows(value: Any) -> bool:
    """The file's ``trust_remote_code`` as pydantic reads it (``true``, ``yes``, ``"on"``)."""
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return False


def _check_remote_code(profile: Profile, data: dict[str, Any], overrides: dict[str, Any],
                       source: str) -> None:
    """Remote code runs only where the profile file itself grants it, for the model it names.

    Overrides come from places less reviewed than a profile file (the launchpad, a run config,
    an environment), so an override may switch ``trust_remote_code`` off or restate it, but
    may not switch it on, nor, where it is on, point the section at another model (whose code
    the file never trusted).
    """
    for path in _REMOTE_CODE_SECTIONS:
        settings: Any = profile
        for key in path:
            settings = getattr(settings, key)
        if not settings.trust_remote_code:
            continue
        name, in_file = ".".join(path), _section(data, path)
        if not _file_allows(in_file.get("trust_remote_code")):
            raise ProfileError(
                f"invalid profile {source}:\n  {name}.trust_remote_code: an override may not "
                "switch on remote code; only the profile file can (set "
                f"{name}.trust_remote_code: true in {source} for a model you trust)")
        overridden = _section(overrides, path)
        if "model" in overridden and overridden["model"] != in_file.get("model"):
            raise ProfileError(
                f"invalid profile {source}:\n  {name}.model: the profile trusts remote code "
                f"of {in_file.get('model')!r} only; an override may not point it at "
                f"{overridden['model']!r} (change the model in the profile file, or override "
                f"{name}.trust_remote_code to false)")


EXTENDS = "extends"
"""A profile file's key naming the profile it changes (a shipped name, or a YAML path
relative to the file): the file then holds only what differs, laid over that profile's
settings (``merge_settings``; ``null`` clears a section)."""


def read_profile_file(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A profile file's settings, with the profile it ``extends`` (recursively) under them."""
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise ProfileError(f"profile {path}: {EXTENDS} runs in a circle ({chain})")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ProfileError(f"profile {path} must be a YAML mapping, got {type(data).__name__}")
    parent = data.pop(EXTENDS, None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ProfileError(f"profile {path}: {EXTENDS} must name a profile, got {parent!r}")
    base = PROFILE_DIR / f"{parent}.yaml"
    if not base.is_file():
        base = path.parent / parent
    if not base.is_file():
        raise ProfileError(f"profile {path}: {EXTENDS}: {parent!r} is not one of "
                           f"{available_profiles()} and not a YAML file beside it")
    return merge_settings(read_profile_file(base, (*seen, path.resolve())), data)


def load_profile(name_or_path: str, overrides: dict[str, Any] | None = None) -> Profile:
    """A named profile (``demo``, ``paper``) or a YAML file, with optional nested overrides.

    Overrides may change any setting except grant remote code (``_check_remote_code``)."""
    path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ProfileError(
                f"unknown profile {name_or_path!r}: not one of {available_profiles()} "
                "and not a YAML file"
            )
    data = read_profile_file(path)
    profile = parse_profile(merge_settings(data, overrides or {}), str(path))
    _check_remote_code(profile, data, overrides or {}, str(path))
    return profile
