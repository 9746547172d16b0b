"""Where trained adapters live: one folder per cache key, a pointer to the current one, and the
cache key and its reader.

An adapter's home is ``.../<adapter name>/``. Each training writes its adapter into
``<home>/<key>/`` (the first ``KEY_CHARS`` hex digits of its cache key, ``training_key``), once,
by one rename of a finished scratch folder (``publish``): a key names one set of weights, and a
reader holding a folder never sees it change. ``<home>/current`` names the key the adapter asset
last materialised (``record_current``); recording it removes the home's other key folders. A
training killed part-way leaves a scratch folder ``<home>/.<key>-XXXXXXXX``, removed by the next
training (``remove_leftovers``) unless its process still lives.

A reader checks the folder ``current`` names (``check_adapter``): that it is the adapter asked
for (task, split, adapter, method and cache key as recorded) and that its weights hash to what
the training recorded, the adapter's data version; a folder copied from another adapter, or
weights changed in place, is refused naming the file, what was expected and what was found.
A cache hit is read the same way (``cached_result``). Keyed folders need no swap or cleanup
of another adapter's debris: a crash leaves a whole folder or none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the kept epoch's validation files: its validator writes them into the epoch's snapshot,
# which the trainer publishes as the key folder
from saturated_dag.evaluation.validation import VALIDATION_FILE, VALIDATION_SAMPLES_FILE
from saturated_dag.infra.atomic import (
    MKDTEMP_PART,
    atomic_write_text,
    fsync_dir,
    read_proven_parquet,
    remove_dead_scratch,
)

KEY_CHARS = 16
"""Hex digits of the cache key in a folder's name: 64 bits, and the record inside the folder
(``training_config.json``, ``result.json``) holds the whole key, which a cache hit checks."""

ADAPTER_WEIGHTS = "adapter_model.safetensors"
"""The weights file of a PEFT adapter folder; its hash is the adapter's data version."""

RESULT_FILE = "result.json"
"""The key folder's record of its training (``TrainResult``, the weights' hash and the cache
key it was trained under), written as the training publishes it
(``runner.write_result``): what a later cache hit reads and checks."""

CURRENT_FILE = "current"
"""The file in an adapter's home that names its current key folder."""

TRAINING_RECORD = "training_config.json"
"""The training's settings, method and cache key, written by the trainer into the folder."""

_KEY_FOLDER = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")


class AdapterMismatch(ValueError):
    """The folder an adapter's ``current`` names is not that adapter, or its weights are not
    the ones its training recorded."""


@dataclass(frozen=True)
class AdapterIdentity:
    """What a reader expects an adapter to be: its task, split and name (the name holds the
    cell, the configuration and the training seed: ``dpo_entropy_lr0.0003_seed1``) and its
    method. Its home is ``adapters/<task>/<split>/<adapter>`` under the output folder."""

    task: str
    split: str
    adapter: str
    method: str

    def describe(self) -> str:
        return f"{self.task}/{self.split}/{self.adapter} ({self.method})"


def _read_json(path: Path) -> dict[str, Any]:
    """A record file of the folder, parsed; a missing or unreadable one is a mismatch."""
    if not path.is_file():
        raise AdapterMismatch(f"{path} is missing: the folder is not a whole trained adapter")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AdapterMismatch(f"{path} cannot be read ({err})") from None
    if not isinstance(value, dict):
        raise AdapterMismatch(f"{path} does not hold a record (found {type(value).__name__})")
    return value


def check_adapter(folder: Path, expected: AdapterIdentity) -> dict[str, Any]:
    """Check that key folder ``folder`` holds the adapter ``expected`` with the weights its
    training recorded; its ``result.json`` record when it does.

    Identity: ``result.json``'s ``adapter_dir`` (where its training published it, the last
    parts ``adapters/<task>/<split>/<adapter>/<key>``, so a moved output folder still
    matches) must name ``expected`` and this folder's key; its ``cache_key`` must start with
    the folder's name; ``training_config.json`` must hold the same cache key and the method.
    Weights: ``adapter_model.safetensors`` must hash to ``result.json``'s ``weights_version``
    (the adapter asset's data version). The hash is ``shards.file_fingerprint``, memoised
    per file, size and modification time, so each weights file is read at most once per
    process however many readers check it.

    Validation results (``VALIDATION_FILE``, ``VALIDATION_SAMPLES_FILE``): each must hash to the
    content hash it carries (``read_proven_parquet``), so an edited or unproven one makes the
    folder no cache hit instead of a selection read from it.

    Raises ``AdapterMismatch`` naming the file, what was expected and what was found."""
    from saturated_dag.infra.shards import file_fingerprint

    folder = Path(folder)
    result_path, record_path = folder / RESULT_FILE, folder / TRAINING_RECORD
    result = _read_json(result_path)
    recorded = str(result.get("adapter_dir") or "")
    found = Path(recorded).parts[-5:]
    wanted = ("adapters", expected.task, expected.split, expected.adapter, folder.name)
    if found != wanted:
        raise AdapterMismatch(
            f"{result_path}: expected the adapter {expected.describe()} in key folder "
            f"{folder.name}, found one trained into {recorded or 'an unrecorded folder'}: "
            "another adapter's folder")
    key = str(result.get("cache_key") or "")
    if key[:KEY_CHARS] != folder.name:
        raise AdapterMismatch(f"{result_path}: expected a cache key starting {folder.name} "
                              f"(the folder's name), found {key[:KEY_CHARS] or 'none'}")
    record = _read_json(record_path)
    if record.get("cache_key") != key or record.get("method") != expected.method:
        raise AdapterMismatch(
            f"{record_path}: expected method {expected.method!r} and cache key "
            f"{key[:KEY_CHARS]}, found {record.get('method')!r} and "
            f"{str(record.get('cache_key'))[:KEY_CHARS]}: another training's record")
    weights = folder / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise AdapterMismatch(f"{weights} is missing")
    version = result.get("weights_version")
    actual = file_fingerprint(weights)
    if actual != version:
        raise AdapterMismatch(f"{weights}: expected weights hashing to {version} (recorded in "
                              f"{result_path}, the adapter's data version), found {actual}: "
                              "the weights were changed after training")
    for name in (VALIDATION_FILE, VALIDATION_SAMPLES_FILE):
        if (folder / name).is_file():
            try:
                read_proven_parquet(folder / name, "the adapter is trained again")
            except (ValueError, OSError) as err:
                raise AdapterMismatch(str(err)) from None
    return result


def key_folder(home: Path, cache_key: str) -> Path:
    """``<home>/<first KEY_CHARS hex digits of cache_key>``: where that training's adapter is."""
    short = cache_key[:KEY_CHARS]
    if not _KEY_FOLDER.fullmatch(short):
        raise ValueError(f"cache key {cache_key!r} does not start with {KEY_CHARS} "
                         "lower-case hex digits")
    return home / short


def current_folder(home: Path) -> Path | None:
    """The adapter's current key folder, as ``<home>/current`` names it; None when the
    adapter was never materialised (or by an older layout, which had no pointer)."""
    pointer = home / CURRENT_FILE
    if home.is_symlink() or not pointer.is_file():
        return None
    key = pointer.read_text(encoding="utf-8").strip()
    if not _KEY_FOLDER.fullmatch(key):
        raise ValueError(f"{pointer}: {key!r} is not a key folder's name "
                         f"({KEY_CHARS} lower-case hex digits)")
    return home / key


def record_current(home: Path, folder: Path) -> list[Path]:
    """Make ``folder`` (a key folder of ``home``) the adapter's current one, then remove the
    home's other key folders; returns those removed. A scratch folder (a live training's)
    is never one of them: its name starts with a dot."""
    if folder.parent != home or not _KEY_FOLDER.fullmatch(folder.name):
        raise ValueError(f"{folder} is not a key folder of {home}")
    if not folder.is_dir():
        raise FileNotFoundError(f"adapter folder {folder} does not exist")
    atomic_write_text(home / CURRENT_FILE, folder.name + "\n")
    removed = []
    for entry in sorted(home.iterdir()):
        if (entry != folder and _KEY_FOLDER.fullmatch(entry.name) and entry.is_dir()
                and not entry.is_symlink()):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def retire_old_layout(home: Path) -> list[Path]:
    """Remove what the earlier layout left at an adapter's home: ``<name>`` as a symlink to a
    sibling ``.<name>@<time>`` folder, that folder, its temporary ``.<name>.link-<pid>``
    links, or ``<name>`` as a plain adapter folder. Its weights were trained by older code,
    under another cache key, so they are never reused. Returns what was removed."""
    parent, name = home.parent, home.name
    if not parent.is_dir():
        return []
    removed: list[Path] = []
    if home.is_symlink():
        home.unlink()
        removed.append(home)
    elif (home / "adapter_config.json").is_file():  # a plain folder, before the symlinks
        shutil.rmtree(home)
        removed.append(home)
    old = re.compile(rf"\.{re.escape(name)}(@\d+|\.link-\d+)")
    for entry in sorted(parent.iterdir()):
        if old.fullmatch(entry.name):
            if entry.is_symlink():
                entry.unlink()
            elif entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                continue
            removed.append(entry)
    return removed


def publish(folder: Path, out: Path, scratch: Path) -> None:
    """Make the finished adapter ``folder`` the key folder ``out`` by one rename.

    ``out`` normally does not exist yet. One that does holds this key's adapter from before,
    found unusable (its weights lost or altered: the cache check trained it again); it is
    moved into ``scratch``, removed with it, first."""
    if out.exists() or out.is_symlink():
        os.replace(out, scratch / "unusable")
    os.rename(folder, out)
    fsync_dir(out.parent)


def remove_leftovers(home: Path) -> list[Path]:
    """Remove the scratch folders ``<home>/.<key>-XXXXXXXX`` (``atomic.make_scratch``) that
    killed trainings of the adapter left, under any key; a live process's is kept. Returns
    what was removed."""
    if not home.is_dir() or home.is_symlink():
        return []
    scratch = re.compile(rf"\.({_KEY_FOLDER.pattern})-{MKDTEMP_PART}")
    keys = sorted({m.group(1) for e in home.iterdir() if (m := scratch.fullmatch(e.name))})
    return [path for key in keys for path in remove_dead_scratch(home / key)[0]]


def training_key(code_version: str, method: str, training: dict[str, Any], policy: dict,
                 sampling: dict[str, Any], answer_check: str, validation_digest: str,
                 data_digest: str) -> str:
    """An adapter's cache key: what it is a function of. ``training``: its resolved settings
    (``TrainingSettings`` as JSON, the precision ``auto`` already resolved to what it means on
    this machine, where it runs left out); ``policy``: the base model's identity; ``sampling``
    and ``answer_check``: how its validation set is sampled and scored (epoch selection);
    ``validation_digest``, ``data_digest``: the validation questions' and the training set's
    hashes (``infra.shards``)."""
    from saturated_dag.infra.shards import stage_key

    config = {"method": method, "training": training, "policy": policy, "sampling": sampling,
              "answer_check": answer_check, "validation": validation_digest}
    return stage_key("adapter", code_version, config, {"data": data_digest})


def cached_result(out: Path, key: str) -> tuple[dict | None, str]:
    """The stored result of an adapter trained under ``key`` in key folder ``out`` if it is
    whole and current, and why not otherwise. Whole means its weights are there and hash to
    what the training recorded: a folder that lost or changed its weights is trained again,
    never reused."""
    from saturated_dag.infra.shards import file_fingerprint

    record, result = out / TRAINING_RECORD, out / RESULT_FILE
    if not (record.is_file() and result.is_file() and (out / "adapter_config.json").is_file()):
        return None, "no trained adapter"
    if json.loads(record.read_text()).get("cache_key") != key:
        return None, "trained under other settings"
    stored = json.loads(result.read_text())
    if stored.get("cache_key") != key:
        return None, "trained under other settings"
    weights = out / ADAPTER_WEIGHTS
    if not weights.is_file():
        return None, f"{weights} is missing"
    recorded = stored.get("weights_version")
    if recorded is None or file_fingerprint(weights) != recorded:
        return None, (f"{weights} does not hash to what its training recorded"
                      if recorded else "no recorded hash of its weights")
    return stored, "hit"


def weights_version(versions: list[str]) -> str:
    """The data version of the weights of one or more adapters, in order: an adapter's own
    weights hash, or one hash over several. The training child computes it for the adapters
    it trained and the adapter asset for its step's: one rule, so a step whose adapters the
    child trained records the child's version."""
    if len(versions) == 1:
        return versions[0]
    import hashlib

    return hashlib.sha256(json.dumps(versions).encode()).hexdigest()
