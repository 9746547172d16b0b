"""Which profile an output folder belongs to, so no profile reads another's files.

Why: asset files are named by their asset key alone (``assets/chain_sum/generation_pool.parquet``),
so two profiles pointed at one folder (``ci`` and a copy of it with another ``chain_sum.seed``)
would read each other's pools, splits and adapters as their own, every check passing. The first
run in a folder writes ``<output_dir>/settings.json``: the profile that owns the folder (as the
code location names it: a shipped name, or a YAML file's absolute path) and the settings that
shape what its files hold. A run of another profile is refused before any step, naming both and
how their settings differ. A run of the owning profile with other settings (an edited file, a
launch override) is the ordinary edit-and-re-run: its stage caches are keyed by the settings
that matter, so it proceeds, and the caller logs which settings changed since the stamp (an
asset the run does not re-materialise still holds the earlier settings' data).

Settings that change how work is done but not what the files hold (batch sizes of engines and
judges, engine memory, shard size, worker counts, the sensors, eval replicates, which are
designed to accumulate) are not recorded (``RUN_LEVEL``). A password in a URI-valued setting
(``tracking.tracking_uri``) is recorded, compared and shown as ``user:***@host``
(``saturated_dag.infra.redact``): the stamp is a file, and its differences go to the run's log.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saturated_dag.infra.redact import redacted

STAMP = "settings.json"

RUN_LEVEL: tuple[str, ...] = (
    "name", "description", "automation", "stages", "verify_workers",
    "evaluation.replicates", "evaluation.adapters_per_pass",
    "policy.batch_size", "policy.vllm", "judges.strong.batch_size", "judges.strong.vllm",
    "scoring.judge_batch_size", "training.validation_batch_size", "training.isolate",
)
"""Dotted settings that may differ between runs sharing a folder: none changes any file's
content (samples are per-row seeded, so batch sizes and shards do not change them; eval
replicates accumulate by design; ``training.isolate`` trains the same bytes in or out of a
child process, BENCHMARKS.md)."""


class OutputFolderInUse(ValueError):
    """The output folder belongs to another profile (its files are that profile's)."""


def _drop(settings: dict[str, Any], dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    node: Any = settings
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(leaf, None)


def data_settings(profile_dump: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's settings that shape what the output files hold (``RUN_LEVEL`` removed),
    every URI's password hidden (``redacted``): what the stamp writes and its messages show."""
    settings = redacted(json.loads(json.dumps(profile_dump, sort_keys=True, default=str)))
    for dotted in RUN_LEVEL:
        _drop(settings, dotted)
    return settings


def fingerprint(settings: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``path: old -> new`` for every leaf that differs (sorted; nested sections walked)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def _identity(profile: str) -> str:
    """A profile as the folder records its owner: a shipped name as is, a YAML file by its
    absolute path (two copies of one profile are two owners)."""
    path = Path(profile).expanduser()
    return str(path.resolve()) if path.suffix in (".yaml", ".yml") or path.is_file() else profile


def _write(path: Path, record: dict[str, Any], exclusive: bool) -> bool:
    """Write the stamp: exclusively (False when it exists already) or by atomic replace."""
    from saturated_dag.infra.atomic import atomic_write_text

    text = json.dumps(record, indent=1, sort_keys=True)
    if not exclusive:
        atomic_write_text(path, text)
        return True
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def claim(output_dir: Path | str, profile: str, profile_dump: Mapping[str, Any]) -> list[str]:
    """Claim ``output_dir`` for ``profile`` (stamping a new folder), or check its owner.

    Raises ``OutputFolderInUse`` naming both profiles and every differing setting when another
    profile owns the folder. For the owning profile, returns the settings that changed since
    the stamp (``path: old -> new``; empty when none) and re-stamps it with the new ones. The
    first stamp is created exclusively, so two runs starting at once on a new folder cannot
    both claim it.
    """
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STAMP
    owner, mine = _identity(profile), data_settings(profile_dump)
    record = {"profile": owner, "name": profile_dump.get("name"),
              "fingerprint": fingerprint(mine), "settings": mine}
    if _write(path, record, exclusive=True):
        return []
    try:
        theirs = json.loads(path.read_text(encoding="utf-8"))
        their_owner, stored = theirs["profile"], theirs["settings"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise OutputFolderInUse(
            f"{path}: unreadable settings stamp ({err}); it says which profile owns this "
            "folder's files. Restore it, or delete the folder to start over") from None
    # a stamp written before passwords were hidden is shown hidden, and rewritten hidden below
    their_settings = redacted(stored)
    changed = differences(their_settings, mine)
    if their_owner != owner:
        shown = "\n".join(f"  {line}" for line in changed[:20])
        more = f"\n  ... and {len(changed) - 20} more" if len(changed) > 20 else ""
        raise OutputFolderInUse(
            f"output folder {folder} belongs to profile {their_owner!r}; this run's profile "
            f"{owner!r} would read its files as its own. They differ in {len(changed)} "
            f"setting(s) that shape those files:\n{shown}{more}\nPoint "
            "SATURATED_DAG_OUTPUT_DIR at a folder of this profile's own, or delete "
            f"{folder} to start over")
    if changed or their_settings != stored:
        try:  # best effort: it only words the next run's warning; a full disk fails the stages
            _write(path, record, exclusive=False)
        except OSError:
            pass
    return changed
