"""A child process that lives only as long as the process that started it.

Why: the training child runs for minutes to hours. If the run process that started it is
SIGKILLed, an unbound child trains on with parent 1 and swaps its adapter in after its run is
dead, while the next run (its slot freed) starts beside it: on a GPU, two trainers at once.
``bind_to_parent`` asks the kernel to SIGKILL this process when its parent dies (Linux
``PR_SET_PDEATHSIG``); ``parent_alive`` is checked once more right before anything is
published, for platforms without it and for the instant between the parent's death and the
signal.

A parent counts as dead when its pid is no longer this process's parent (a dead parent's
children are re-parented at once), when it is a zombie (state ``Z`` in ``/proc/<pid>/stat``:
killed but not yet reaped, as under a supervising shell, where ``kill(pid, 0)`` still
succeeds), or when its pid now names another process (its start time changed). Every worker
a run starts is bound the same way (``bind_worker``: the side-by-side trainers, the answer
checkers), and checks its run once more before it publishes anything.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


class ParentGone(RuntimeError):
    """The process that started this one has died: its run no longer wants the result."""


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks)`` of ``pid`` from ``/proc/<pid>/stat``; None when
    there is no such process. The command name (field 2) may hold spaces and parentheses, so
    the fields are read after its last ``)``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)


def process_alive(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` is a live process: it exists, is not a zombie (``Z``) or dead (``X``),
    and, given ``started`` (its start time as ``start_time`` read it), is still the same
    process, not a later one the kernel gave its pid. Without ``/proc`` (not Linux), whether
    ``kill(pid, 0)`` finds it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's: cannot happen to our parent
        pass
    if not os.path.isdir("/proc/self"):
        return True
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return started is None or stat[1] == started


def start_time(pid: int) -> int | None:
    """``pid``'s start time (clock ticks since boot), which tells it from a later process
    given the same pid; None where ``/proc`` is missing or the process is gone."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def parent_alive(parent: int) -> bool:
    """Whether ``parent`` is still this process's parent and alive: a dead parent's children
    are re-parented to init or a subreaper (the pid changes), and a parent killed but not
    reaped is a zombie, which counts as dead."""
    return os.getppid() == parent and process_alive(parent)


def bind_to_parent(parent: int) -> bool:
    """Die (SIGKILL) when ``parent`` dies; True when the kernel took the request. Exits at
    once if the parent is already gone (it died before the request was made)."""
    bound = False
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        bound = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    if not parent_alive(parent):
        os._exit(1)
    return bound


def require_parent(parent: int, what: str) -> None:
    """Raise ``ParentGone`` unless ``parent`` is alive: call before publishing ``what``."""
    if not parent_alive(parent):
        raise ParentGone(f"the run process {parent} that started this one has died: "
                         f"{what} is not published")


def die_with(pid: int, interval: float = 1.0) -> threading.Thread:
    """Exit this process (``os._exit``) within ``interval`` seconds of ``pid``'s death.

    Why: on CPU each Dagster step runs in a process of the multiprocess executor, forked from
    its fork server, not from the run process; when the run process is SIGKILLed (the OOM
    killer, a node lost) the step would go on computing and writing beside the automatic
    retry. A daemon thread polls the run process; its exit code says nothing was finished.
    Dead means gone, a zombie, or its pid reused by another process; when ``pid`` is this
    process's parent, also a changed parent pid.
    """
    started = start_time(pid)
    was_parent = os.getppid() == pid

    def watch() -> None:
        while True:
            if (was_parent and os.getppid() != pid) or not process_alive(pid, started):
                os._exit(1)
            time.sleep(interval)

    thread = threading.Thread(target=watch, name=f"die-with-{pid}", daemon=True)
    thread.start()
    return thread


def bind_worker(owner: int, interval: float = 1.0) -> None:
    """Bind a worker process to ``owner``, the process that started the workers (a
    ``ProcessPoolExecutor`` initializer): the kernel's parent-death signal, as the Pipes
    training child has (``bind_to_parent``), and the watcher (``die_with``) for a parent
    that dies while the signal is not armed or is a zombie. Why both: the signal fires when
    the thread that started the worker ends, which is the run's own step thread; the watcher
    covers platforms without it."""
    bind_to_parent(owner)
    die_with(owner, interval)
