"""Where trained adapters live: one folder per cache key, and a pointer to the current one.

An adapter's home is ``.../<adapter name>/``. Each training writes its adapter into
``<home>/<key>/``, ``key`` being the first ``KEY_CHARS`` hex digits of its cache key (what the
adapter is a function of: data, settings, base model, code). A folder is written once, by one
rename of a finished scratch folder (``publish``): a key names one set of weights, so nothing
is ever replaced in place, and a reader holding a folder never sees it change under it.

``<home>/current`` names the key the adapter asset last materialised (``record_current``,
one atomic file write); readers resolve the adapter through it (``current_folder``). Recording
a key removes the home's other key folders, so a retrained adapter does not keep its
predecessors' weights on disk. A training killed part-way leaves a scratch folder
``<home>/.<key>-XXXXXXXX``; the next training of the adapter removes it (``remove_leftovers``)
unless the process that made it is still alive.

Why not one folder per adapter name, swapped in by a symlink rename (the earlier layout):
the swap needed sibling ``.<name>@<time>`` folders, temporary links and a cleanup that told
one adapter's debris from another's. Keyed folders need none of it: a crash leaves a whole
folder or none, and a folder whose key is current is, by its name, the adapter asked for.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from saturated_dag.atomic import (
    MKDTEMP_PART,
    atomic_write_text,
    fsync_dir,
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
(``isolated.write_result``): what a later cache hit reads and checks."""

CURRENT_FILE = "current"
"""The file in an adapter's home that names its current key folder."""

_KEY_FOLDER = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")


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
