"""Several LoRA adapters on one base model, each batch row with its own (or none).

Why: evaluating adapters one at a time merges each into its own copy of the base model and
decodes its eval set alone; on a small model a decoding step costs about the same for 64 rows
as for 512, so most of that time is per-step overhead paid once per adapter. Here the base
weights are shared and every adapted ``nn.Linear`` adds, per row, the low-rank update of that
row's adapter, so the eval sets of many adapters (and of the base model) decode in one batch.

The update of module ``W`` for a row of adapter ``a`` is ``x @ A_a.T @ B_a.T * scale_a``
(PEFT's LoRA forward; ``scale = alpha / r``, or ``alpha / sqrt(r)`` with rsLoRA). All
adapters' ``A`` are stacked into one ``(in, sum r)`` matrix and their scaled ``B`` into one
``(sum r, out)``; a per-row mask keeps only the row's own block, so a layer costs two matrix
products whatever the number of adapters. ``tests/generation/test_multi_lora.py`` compares the
logits with PEFT's (merged and mixed-batch ``adapter_names``) forward.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

_UNSUPPORTED = ("use_dora", "use_qalora", "fan_in_fan_out", "lora_bias")


@dataclass
class RowAdapters:
    """Which adapter each row of the current batch uses (0: none), shared by every layer."""

    spans: list[tuple[int, int]] = field(default_factory=list)
    """Columns of adapter ``k`` (1-based) in the stacked matrices: ``spans[k - 1]``."""
    mask: torch.Tensor | None = None
    """``(rows, sum r)``: 1 on the columns of the row's adapter, else 0; None: all base."""

    def add(self, rank: int) -> None:
        """Append an adapter of ``rank`` columns (it becomes adapter ``len(spans)``)."""
        start = self.spans[-1][1] if self.spans else 0
        self.spans.append((start, start + rank))

    @property
    def width(self) -> int:
        return self.spans[-1][1] if self.spans else 0

    def set_rows(self, adapters: torch.Tensor | None) -> None:
        """Route the next forward passes' rows to ``adapters[row]`` (1-based; 0 = base)."""
        if adapters is None or not bool((adapters > 0).any()):
            self.mask = None
            return
        owner = torch.repeat_interleave(torch.arange(1, len(self.spans) + 1),
                                        torch.tensor([end - start for start, end in self.spans]))
        self.mask = (adapters.to(torch.long).cpu()[:, None] == owner[None, :]).float()

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the rows ``keep`` (indices), as the decoder drops finished rows."""
        if self.mask is not None:
            self.mask = self.mask[keep.cpu()]


class MultiLoraLinear(nn.Module):
    """``base(x)`` plus, per row, that row's adapter's low-rank update."""

    def __init__(self, base: nn.Linear, a: torch.Tensor, b: torch.Tensor, rows: RowAdapters):
        super().__init__()
        self.base = base
        self.a, self.b, self.rows = a, b, rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        mask = self.rows.mask
        if mask is None:
            return out
        h = (x @ self.a) * mask.to(x.dtype).to(x.device).unsqueeze(1)
        return out + h @ self.b


@dataclass
class LoraWeights:
    """One PEFT LoRA folder: per module name, ``A (r, in)`` and ``B (out, r)`` times scale."""

    folder: Path
    rank: int
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]]


def read_adapter(folder: str | Path) -> LoraWeights:
    """The LoRA matrices of a PEFT adapter folder, ``B`` already multiplied by its scale.

    Refuses what this forward does not implement (DoRA, QA-LoRA, fan-in-fan-out layers, LoRA
    biases, per-module rank or alpha patterns, extra trained modules) instead of silently
    evaluating something else."""
    from safetensors.torch import load_file

    path = Path(folder)
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"no LoRA adapter at {path} (adapter_config.json missing)")
    config: dict[str, Any] = json.loads(config_file.read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{path}: peft_type {config.get('peft_type')!r} is not LoRA")
    for key in _UNSUPPORTED:
        if config.get(key):
            raise ValueError(f"{path}: {key} adapters are not supported by the multi-adapter "
                             "forward; evaluate them merged (evaluation.adapters_per_pass: 1)")
    for key in ("rank_pattern", "alpha_pattern", "modules_to_save"):
        if config.get(key):
            raise ValueError(f"{path}: {key} is not supported by the multi-adapter forward")
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    scale = alpha / rank ** 0.5 if config.get("use_rslora") else alpha / rank
    weights_file = path / "adapter_model.safetensors"
    if not weights_file.is_file():
        raise FileNotFoundError(f"{path}: adapter_model.safetensors missing")
    tensors = load_file(str(weights_file))
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for key, a in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        stem = key[: -len(".lora_A.weight")]
        name = stem.removeprefix("base_model.model.")
        b = tensors.get(f"{stem}.lora_B.weight")
        if b is None:
            raise ValueError(f"{path}: {stem} has lora_A but no lora_B")
        modules[name] = (a.float(), b.float() * scale)
    if not modules:
        raise ValueError(f"{path}: no LoRA weights in adapter_model.safetensors")
    return LoraWeights(path, rank, modules)


@contextmanager
def attached_adapters(model: nn.Module, folders: Sequence[str | Path]
                      ) -> Iterator[RowAdapters]:
    """Attach ``folders`` (adapter ``k`` is ``folders[k - 1]``) to ``model`` for the block.

    Each adapted ``nn.Linear`` is wrapped while the block runs and restored after it (also on
    an error), so the model serves the base rows unchanged in between. Yields the
    ``RowAdapters`` whose ``set_rows`` routes each batch row to its adapter.
    """
    weights = [read_adapter(f) for f in folders]
    rows = RowAdapters()
    for w in weights:
        rows.add(w.rank)
    names = sorted({name for w in weights for name in w.modules})
    found = dict(model.named_modules())
    replaced: list[tuple[nn.Module, str, nn.Module]] = []
    try:
        for name in names:
            module = found.get(name)
            if not isinstance(module, nn.Linear):
                raise ValueError(f"adapter module {name!r} is not a Linear layer of this model "
                                 "(an adapter trained on another base model?)")
            param = module.weight
            a = torch.zeros(module.in_features, rows.width, dtype=param.dtype,
                            device=param.device)
            b = torch.zeros(rows.width, module.out_features, dtype=param.dtype,
                            device=param.device)
            for w, (lo, hi) in zip(weights, rows.spans, strict=True):
                if name in w.modules:
                    wa, wb = w.modules[name]
                    if wa.shape != (w.rank, module.in_features) or \
                            wb.shape != (module.out_features, w.rank):
                        raise ValueError(f"{w.folder}: {name} has LoRA shapes {tuple(wa.shape)}"
                                         f", {tuple(wb.shape)}, not those of this model's layer")
                    a[:, lo:hi] = wa.T.to(param.dtype)
                    b[lo:hi, :] = wb.T.to(param.dtype)
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, MultiLoraLinear(module, a, b, rows))
            replaced.append((parent, child, module))
        yield rows
    finally:
        for parent, child, module in reversed(replaced):
            setattr(parent, child, module)
        rows.mask = None


@contextmanager
def merged_adapter(model: nn.Module, folder: str | Path) -> Iterator[None]:
    """Merge the LoRA adapter in ``folder`` into ``model``'s weights for the block.

    ``W + scale * B @ A`` per adapted layer, as PEFT's ``merge_and_unload`` (the logits
    agree within 1e-5, ``tests/generation/test_multi_lora.py``); after the block (also on an error)
    each weight is copied back from a saved copy, so the base model is restored bit for bit,
    not by subtracting the update again. Why: one adapter evaluated through the attached
    forward costs two extra matrix products per layer (11-13% per token on the demo model).
    Yields None: no row routing is needed.
    """
    weights = read_adapter(folder)
    found = dict(model.named_modules())
    saved: list[tuple[torch.Tensor, torch.Tensor]] = []
    try:
        with torch.no_grad():
            for name, (a, b) in weights.modules.items():
                module = found.get(name)
                if not isinstance(module, nn.Linear):
                    raise ValueError(f"adapter module {name!r} is not a Linear layer of this "
                                     "model (an adapter trained on another base model?)")
                param = module.weight
                if a.shape != (weights.rank, module.in_features) or \
                        b.shape != (module.out_features, weights.rank):
                    raise ValueError(f"{weights.folder}: {name} has LoRA shapes "
                                     f"{tuple(a.shape)}, {tuple(b.shape)}, not those of this "
                                     "model's layer")
                saved.append((param, param.detach().clone()))
                param.add_((b @ a).to(device=param.device, dtype=param.dtype))
        yield None
    finally:
        with torch.no_grad():
            for param, original in saved:
                param.copy_(original)


@contextmanager
def merged_peft_lora(model: nn.Module) -> Iterator[None]:
    """A PEFT LoRA model (in training) with its adapter merged for the block, on CPU.

    Validation pass@1 inside training samples the model being trained; merged, each adapted
    layer is one product instead of three. PEFT's ``unmerge_adapter`` subtracts the update
    again, which leaves the frozen base weights off in their last bits, so the weights are
    copied back from a saved copy (the training continues on exactly the weights it had).
    Only on CPU: on an accelerator the saved copy would hold a second set of the adapted
    weights in device memory beside the optimizer; there the block runs unmerged.
    """
    from peft.tuners.lora import LoraLayer

    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    first = next(model.parameters(), None)
    if not layers or not hasattr(model, "merge_adapter") or first is None \
            or first.device.type != "cpu":
        yield None
        return
    saved = [(m.get_base_layer().weight, m.get_base_layer().weight.detach().clone())
             for m in layers]
    with torch.no_grad():
        model.merge_adapter()
    try:
        yield None
    finally:
        with torch.no_grad():
            model.unmerge_adapter()
            for param, original in saved:
                param.copy_(original)
