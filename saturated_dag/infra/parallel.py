"""How many model steps a run executes at once, and with how many torch threads each.

Why it matters: the embedded world is a sampling workload on a small CPU, where one-thread
processes side by side beat one multi-thread process and torch threads beside another
CPU-bound process run several times slower (OpenMP oversubscription; docs/performance.md,
"Steps and threads"). So a model step never runs more threads than the cores its layout gives
it, and the gpu concurrency limit, which every model step claims, has exactly as many slots as
the layout runs model steps at once: two runs side by side never hold more model steps either.

The layouts (``StepLayout``, chosen by ``step_layout``): on an accelerator (CUDA, or any vLLM
engine) the run's own process, one model step at a time per device, so the engine loads once;
on CPU, ``execution.model_steps: one_at_a_time`` (the default) the run's own process, one model
step at a time with a torch thread per core, a step's trainings side by side in one-thread
worker processes (``training_workers``, ``training.runner.SideBySide``); ``one_per_core`` a
process per step (Dagster's multiprocess executor), one per core, each with one torch thread.

On a CPU every training runs one torch thread, so an adapter's weights do not depend on the
machine's cores. One at a time is the CPU default because Dagster starts a process per step in
about a second and most demo steps last a few seconds.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepLayout:
    """``steps`` model steps at once, each with ``threads`` torch threads (None: torch's
    default, on an accelerator), in ``processes``: ``run`` (the run's own) or ``per_step``."""

    steps: int
    threads: int | None
    processes: str


def cpu_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cuda_devices() -> int:
    """Visible CUDA devices (0 without torch's CUDA build or a device).

    torch's CPU build (its version ends ``+cpu``) sees no device, and is not imported to say
    so: importing torch costs about 1.5 s at every code-location load.
    """
    try:
        if importlib.metadata.version("torch").endswith("+cpu"):
            return 0
        import torch
    except (ImportError, importlib.metadata.PackageNotFoundError):
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def on_cpu(profile: Any) -> bool:
    """Whether every model of the profile runs on the CPU under transformers (the policy, an
    LLM strong judge, and the training, which TRL puts on a CUDA device when there is one)."""
    policy = profile.policy
    if policy.backend != "transformers" or not policy.device.startswith("cpu"):
        return False
    strong = profile.judges.strong
    if strong.kind == "llm" and (strong.backend != "transformers"
                                 or not strong.device.startswith("cpu")):
        return False
    return cuda_devices() == 0


def step_layout(profile: Any) -> StepLayout:
    """The profile's layout on this machine (see the module doc)."""
    if not on_cpu(profile):
        return StepLayout(max(1, cuda_devices()), None, "run")
    if profile.execution.model_steps == "one_per_core":
        return StepLayout(cpu_cores(), 1, "per_step")
    return StepLayout(1, cpu_cores(), "run")


def training_workers(profile: Any) -> int:
    """Processes that train a step's adapters side by side, one torch thread each
    (``training.runner.policy_for``): on a CPU, the cores when the run's own process holds
    them (``one_at_a_time``) and 1 under ``one_per_core`` (its steps already share them);
    0 on an accelerator (no side by side, torch's threads)."""
    layout = step_layout(profile)
    if layout.threads is None:
        return 0
    return cpu_cores() if layout.processes == "run" else 1


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch on ``threads`` for the block (``None``: unchanged), then as it was."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def limit_threads(threads: int) -> None:
    """Run this process's torch (and the OpenMP and BLAS libraries under it) on ``threads``."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
