"""What every benchmark shares: model loading, alternating timed repeats, peak tensor memory,
the machine description and the Markdown/JSON report.

Why alternate: this machine's two cores are shared with other work, so load changes over
minutes. Running variant A, then B, then A again ... in one process and taking medians lets
both variants see the same load; the ratio of medians is what the reports quote.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MODELS = ("arith-base", "smollm2-135m-instruct")


# --- peak memory -----------------------------------------------------------------------------

class PeakTensorMemory(TorchDispatchMode):
    """Peak bytes of tensor storage allocated by torch operators inside the ``with`` block.

    Why this measure: torch's CPU allocator keeps no statistics and the resident set of a
    process also moves with the C library's allocator caching, so neither isolates what a
    computation needs. Every operator's output storage is counted when it is created and
    uncounted when Python frees it; tensors that existed before the block (model weights,
    inputs) are not counted. Scratch buffers inside one fused kernel are invisible (the same
    for every variant compared).
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def _release(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor) and t.device.type != "meta"}
        for value in tree_flatten(out)[0]:
            if not isinstance(value, torch.Tensor) or value.device.type == "meta":
                continue
            storage = value.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size == 0 or key in self._sizes or key in inputs:
                continue  # a view or an in-place result (of any tensor): no new memory
            self._sizes[key] = size
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._release, key)
        return out


def peak_memory(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(peak extra tensor bytes, result) of one call of ``fn``."""
    with PeakTensorMemory() as tracker:
        result = fn()
    return tracker.peak, result


# --- timing ----------------------------------------------------------------------------------

def alternate(variants: dict[str, Callable[[], Any]], repeats: int,
              warmup: bool = True) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Seconds per call of each variant, run in turn ``repeats`` times; last results kept."""
    results: dict[str, Any] = {}
    if warmup:
        for name, fn in variants.items():
            results[name] = fn()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            results[name] = fn()
            seconds[name].append(time.perf_counter() - start)
    return seconds, results


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# --- setup and report ------------------------------------------------------------------------

def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="arith-base",
                        help=f"one of {MODELS}, or a model folder")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: steadier timings on a shared 2-core machine)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each variant")
    parser.add_argument("--toy", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as JSON")
    return parser


def load_backend(spec: str, threads: int, batch_size: int = 64) -> Any:
    """The project's transformers backend (and through it the plain model and tokenizer)."""
    from saturated_dag.generation.transformers_backend import TransformersBackend

    torch.set_num_threads(threads)
    return TransformersBackend.load(spec, batch_size=batch_size)


def machine() -> dict[str, Any]:
    """Where and when: CPU, cores, torch threads, load average, date."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
    }


@dataclass
class Report:
    """A benchmark's result: a title, table rows, and everything needed to reproduce it."""

    benchmark: str
    model: str
    settings: dict[str, Any]
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def markdown(self) -> str:
        def cell(value: Any) -> str:
            if isinstance(value, float):
                return f"{value:.4g}"
            return str(value)

        lines = [f"### {self.benchmark} — {self.model}", "",
                 "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows]
        lines += ["", "summary: " + json.dumps(self.summary, default=float),
                  "settings: " + json.dumps(self.settings, default=str),
                  "machine: " + json.dumps(machine())]
        return "\n".join(lines)

    def emit(self, out: Path | None) -> None:
        print(self.markdown(), flush=True)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            payload = {"benchmark": self.benchmark, "model": self.model,
                       "settings": self.settings, "columns": self.columns, "rows": self.rows,
                       "summary": self.summary, "machine": machine()}
            out.write_text(json.dumps(payload, indent=2, default=float))


def chain_sum_prompts(backend: Any, count: int, seed: int = 1234) -> tuple[list[str], list[Any]]:
    """``count`` chain-sum questions over the demo's D cells, rendered for ``backend``."""
    from saturated_dag.tasks.chain_sum import build_pool

    cells = [(3, 1), (4, 1), (5, 1), (3, 2), (4, 2), (5, 2)]
    per_cell = -(-count // len(cells))
    pool = build_pool("eval", cells, per_cell, seed)
    # Round-robin over cells, so a short list still mixes prompt and answer lengths.
    questions = [pool[c * per_cell + k] for k in range(per_cell) for c in range(len(cells))]
    questions = questions[:count]
    return [backend.render(q.prompt_text) for q in questions], questions


def until_eos(row: list[int], eos_ids: Any) -> list[int]:
    """Generated tokens up to and including the first end-of-sequence token."""
    for i, token in enumerate(row):
        if token in eos_ids:
            return row[: i + 1]
    return row


def left_padded(encoded: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids padded on the left to one width, and their attention mask (``generate``'s
    batched input)."""
    width = max(len(e) for e in encoded)
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    return ids, mask
