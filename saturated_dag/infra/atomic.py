"""Atomic file writes: a file appears complete or not at all.

Why: a killed process, a full disk or a read-only folder part-way through a write must never
leave a truncated Parquet file, CSV or figure where a reader (the next asset, the UI) expects
a whole one. Every write goes to a temporary file beside the final name, is flushed and
fsynced, then renamed over the target with ``os.replace`` (atomic on POSIX within one
filesystem), and the folder is fsynced so the rename itself survives a power cut. On any
failure the temporary file is removed and the previous file, if any, is left untouched; the
error names the path and the cause (``OutputWriteError``).

The temporary file comes from ``mkstemp``, which creates it with mode 0600 whatever the
umask; before the rename it is given the mode a plain ``open()`` would have given it,
``0o666 & ~umask`` (``new_file_mode``), so a group-shared output folder (umask 002) stays
readable by the group and the mode does not depend on whether a file was written atomically.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the model loaders import this module without it
    import polars as pl

_HINTS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file size limit is exceeded",
    errno.EACCES: "the output folder is not writable",
    errno.EPERM: "the output folder is not writable",
    errno.EROFS: "the filesystem is read-only",
}


class OutputWriteError(OSError):
    """A write that failed and left the previous file (if any) as it was."""

    def __str__(self) -> str:
        return str(self.strerror)


def describe_os_error(err: OSError, path: Path) -> str:
    """A one-line account of a failed write: path, cause, and that nothing was replaced."""
    hint = _HINTS.get(err.errno or -1, "")
    cause = f"{err.strerror or err} [{errno.errorcode.get(err.errno or -1, 'errno ?')}]"
    return (f"could not write {path}: {cause}{' (' + hint + ')' if hint else ''}; "
            "the previous file, if any, was left intact")


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows.

    ``os.umask`` can only be read by setting it, and between setting and restoring it another
    thread's new file would get the wrong mode; Linux reports it in ``/proc/self/status``, so
    the set-and-restore is only the fallback.
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~current_umask()


def new_folder_mode() -> int:
    """The mode ``os.mkdir`` gives a new folder: ``0o777`` less the umask (``mkdtemp``'s
    folders are 0700 whatever the umask)."""
    return 0o777 & ~current_umask()


def give_umask_modes(folder: Path) -> None:
    """Give ``folder`` and everything in it the modes a plain ``mkdir``/``open`` would.

    For a folder built in a ``mkdtemp`` staging folder and renamed into place (an adapter, a
    converted model): ``mkdtemp`` makes it 0700 and some writers (safetensors weights) make
    their files 0600, so without this a group-shared output folder (umask 002) would hold
    folders only their writer can read.
    """
    file_mode, folder_mode = new_file_mode(), new_folder_mode()
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root) / name
            if not path.is_symlink():  # a link's target is not this folder's to change
                path.chmod(folder_mode if name in folders else file_mode)
    folder.chmod(folder_mode)


TEMPORARY = re.compile(r"\..+\.(\d+)\.[a-z0-9_]{8}\.tmp")
"""A temporary file of ``atomic_write``: ``.<name>.<writer's pid>.<random>.tmp``."""


def remove_dead_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files in ``folder`` whose writer is gone (a SIGKILLed write; a
    live writer's, this process's included, are left alone). Called before every write, so a
    killed write's file is swept the next time its folder is written."""
    removed = []
    for entry in folder.glob(".*.tmp"):
        match = TEMPORARY.fullmatch(entry.name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _pid_alive(pid):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def atomic_write(path: Path | str, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(handle)`` on a temporary file beside ``path``, then rename it into place.

    The temporary file's name holds the writer's process id, so debris of a killed write is
    told from a live one's and removed by the next write in the folder."""
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                   dir=path.parent)
        try:
            os.fchmod(fd, new_file_mode())  # mkstemp's 0600 -> what open() would give
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
        fsync_dir(path.parent)
    except OSError as err:
        raise OutputWriteError(err.errno, describe_os_error(err, path)) from err
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    return atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8") -> Path:
    return atomic_write_bytes(path, text.encode(encoding))


def _polars_frame(frame: Any, what: str) -> pl.DataFrame:
    """``frame`` if it is a polars DataFrame; anything else is refused by name."""
    import polars as pl

    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"{what} needs a polars DataFrame, got {type(frame).__module__}."
                        f"{type(frame).__name__} (convert a pandas frame with pl.from_pandas)")
    return frame


PROOF_KEY = "saturated_dag/content_hash"
"""The Parquet key-value metadata entry that carries a file's content hash (``frame_digest``)."""


class UnprovenFileError(ValueError):
    """A Parquet file that does not prove its content: no content hash, or another one."""


def atomic_write_parquet(frame: pl.DataFrame, path: Path | str,
                         content_hash: str | None = None) -> Path:
    """A polars DataFrame as Parquet, written atomically, carrying its own content hash.

    The hash (``shards.frame_digest``; ``content_hash`` when the caller has computed it) goes
    into the file's key-value metadata (``PROOF_KEY``), so the file proves its content to any
    reader (``read_proven_parquet``), whatever a Dagster instance remembers of it: an edited
    file is refused on another machine or with a new ``DAGSTER_HOME`` too.

    Serialised in memory first, then written: polars wraps an error of the file it writes into
    in a ``ComputeError``, which would lose the ``OSError`` (full disk, quota) that
    ``atomic_write`` turns into a clear ``OutputWriteError``.
    """
    from saturated_dag.infra.shards import frame_digest  # shards writes through this module

    frame = _polars_frame(frame, "atomic_write_parquet")
    buffer = io.BytesIO()
    frame.write_parquet(buffer, metadata={PROOF_KEY: content_hash or frame_digest(frame)})
    return atomic_write(path, lambda handle: handle.write(buffer.getbuffer()))


def read_proven_parquet(path: Path | str, remedy: str) -> pl.DataFrame:
    """The frame of a Parquet file that ``atomic_write_parquet`` wrote, checked against the
    content hash it carries (``check_parquet_proof``); ``remedy`` says what re-makes it."""
    import polars as pl

    frame = pl.read_parquet(Path(path))
    check_parquet_proof(path, frame, remedy)
    return frame


def check_parquet_proof(path: Path | str, frame: pl.DataFrame, remedy: str,
                        content_hash: str | None = None) -> None:
    """Refuse ``frame``, read from ``path``, unless it hashes (``content_hash``, when the
    caller has computed it) to the content hash the file carries.

    A file without the hash (written by hand, or by a version before files carried one) or
    whose content no longer hashes to it (edited) is refused with ``UnprovenFileError``,
    naming the file, both hashes and ``remedy`` (what re-makes the file): nothing downstream
    reads data no run wrote.
    """
    import polars as pl

    from saturated_dag.infra.shards import frame_digest

    file = Path(path)
    recorded = (pl.read_parquet_metadata(file) or {}).get(PROOF_KEY)
    if recorded is None:
        raise UnprovenFileError(f"{file} carries no content hash ({PROOF_KEY} in its Parquet "
                                f"metadata): it was not written by this pipeline, or by a "
                                f"version before files carried one; {remedy}")
    found = content_hash or frame_digest(frame)
    if found != recorded:
        raise UnprovenFileError(f"{file} was changed after it was written: its content hashes "
                                f"to {found[:12]}, the hash it was written with is "
                                f"{recorded[:12]}; {remedy}")


def atomic_write_csv(frame: pl.DataFrame, path: Path | str, **kwargs: Any) -> Path:
    """A polars DataFrame as CSV (``DataFrame.write_csv``'s options), written atomically."""
    frame = _polars_frame(frame, "atomic_write_csv")
    return atomic_write_text(path, frame.write_csv(None, **kwargs))


def atomic_save_figure(figure: Any, path: Path | str, **kwargs: Any) -> Path:
    """A figure's ``savefig`` into a temporary file, then renamed into place."""
    kwargs.setdefault("format", Path(path).suffix.lstrip(".") or "png")
    return atomic_write(path, lambda handle: figure.savefig(handle, **kwargs))


# --- scratch folders beside a target: ``.<name>-XXXXXXXX``, built then renamed into place ------

# ``tempfile.mkdtemp``'s random part: 8 characters from this alphabet (CPython's
# ``tempfile._RandomNameSequence``). It has no "-", "." or "@", so ``.sft-`` plus 8 of them
# is never another target's scratch folder: target ``sft-abc`` leaves ``.sft-abc-XXXXXXXX``
# (a character after ``.sft-`` that the pattern refuses, or another length), and
# ``sft_entropy``'s ``.sft_entropy-...`` does not start with ``.sft-`` at all.
MKDTEMP_PART = "[a-z0-9_]{8}"
OWNER_FILE = "owner.json"


def scratch_pattern(name: str) -> re.Pattern[str]:
    """The names of the scratch folders ``make_scratch`` makes for target ``name``."""
    return re.compile(rf"\.{re.escape(name)}-{MKDTEMP_PART}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OSError:
        return False
    return True


def scratch_owner_alive(folder: Path) -> bool:
    """Whether the process that made scratch ``folder`` is still running on this machine.

    A folder without a readable owner file (an older version's, or a process killed before it
    wrote one) or owned by a process that is gone counts as dead. One target built on two
    machines at once is not supported (both would rename into the same place), so another
    machine's owner counts as dead too rather than leaving its leftovers forever.
    """
    try:
        owner = json.loads((folder / OWNER_FILE).read_text())
        host, pid = owner["host"], int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return host == socket.gethostname() and pid != os.getpid() and _pid_alive(pid)


def make_scratch(target: Path) -> Path:
    """A new scratch folder ``.<target name>-XXXXXXXX`` beside ``target``, marked as this
    process's so that a concurrent start for the same target leaves it alone."""
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    (folder / OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(),
                                                 "pid": os.getpid()}))
    return folder


def remove_dead_scratch(target: Path) -> tuple[list[Path], bool]:
    """Remove the scratch folders of ``target`` whose process is gone (a killed run's).

    Returns what was removed and whether a live process still has one. Only real folders
    match; links and files of the same shape are left alone.
    """
    if not target.parent.is_dir():
        return [], False
    pattern, removed, alive = scratch_pattern(target.name), [], False
    for entry in sorted(target.parent.iterdir()):
        if pattern.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            if scratch_owner_alive(entry):
                alive = True
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed, alive
