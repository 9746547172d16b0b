"""A child process that lives only as long as the process that started it.

Why: the training child runs for minutes to hours. If the run process that started it is
SIGKILLed, the child used to train on with parent 1 and swap its adapter in after its run was
dead, while the next run (its slot freed) started beside it: on a GPU, two trainers at once.
``bind_to_parent`` asks the kernel to SIGKILL this process when its parent dies (Linux
``PR_SET_PDEATHSIG``); ``parent_alive`` is checked once more right before anything is
published, for platforms without it and for the instant between the parent's death and the
signal.
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


def parent_alive(parent: int) -> bool:
    """Whether ``parent`` is still this process's parent (a dead parent's children are
    re-parented to init or a subreaper, so the pid changes)."""
    return os.getppid() == parent


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
    """

    def watch() -> None:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive, another user's: cannot happen to our parent
                pass
            time.sleep(interval)

    thread = threading.Thread(target=watch, name=f"die-with-{pid}", daemon=True)
    thread.start()
    return thread
