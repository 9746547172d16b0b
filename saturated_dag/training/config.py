"""One config dataclass per method, with the paper's defaults (App. B, Table 5).

Learning rates and epochs are the paper's for Qwen3-1.7B; the demo profile overrides them for
its small model.

Batch sizes count training examples as the paper's Table 5 does: completions (sequences) for
SFT, RAFT and σ-RRHF, preference pairs for DPO (TRL's convention). ``batch_size`` examples
make one optimizer step, ``per_device_batch_size`` go through one forward pass, and the
ratio is the number of gradient-accumulation micro-batches. σ-RRHF never splits a question
across micro-batches (its rank loss compares a question's completions): a micro-batch holds
``max(1, per_device_batch_size // largest group)`` whole questions (``rrhf_questions_per_device``
in ``training.rrhf_trainer``), so with the paper's n = 8 and 8 completions per device batch a
micro-batch is one question.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saturated_dag.config import TrainingSettings


@dataclass
class LoraSettings:
    r: int = 32
    alpha: int = 64  # α = 2r
    dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class TrainSettings:
    """Shared by every method: AdamW, cosine schedule, warmup 0.1, weight decay 0.01."""

    epochs: int = 4  # checkpoints after each epoch; the best by validation pass@1 is kept
    batch_size: int = 8
    """Examples per optimizer step: completions (SFT, RAFT, σ-RRHF) or pairs (DPO)."""
    per_device_batch_size: int = 8
    """Examples per forward pass (σ-RRHF: rounded down to whole questions, at least one)."""
    learning_rate: float = 1e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 2048
    seed: int = 0
    logging_steps: int = 1
    dtype: str = "auto"
    """auto | float32 | bfloat16: the base model's weights and the bf16 mixed-precision flag.
    auto is bfloat16 on a CUDA device that supports it, else float32 (``resolve_dtype``)."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in backward (non-reentrant): long sequences fit."""
    lora: LoraSettings = field(default_factory=LoraSettings)

    @property
    def grad_accumulation(self) -> int:
        """Micro-batches per optimizer step: ``batch_size / per_device_batch_size``."""
        if self.batch_size % self.per_device_batch_size:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of "
                             f"per_device_batch_size {self.per_device_batch_size}")
        return self.batch_size // self.per_device_batch_size


DTYPES = ("auto", "float32", "bfloat16")


def resolve_dtype(name: str) -> str:
    """The training precision ``name`` means on this machine: ``float32`` or ``bfloat16``.

    auto picks bfloat16 only on a CUDA device that supports it (the GPU the paper profile is
    written for), float32 elsewhere. An explicit bfloat16 is honoured on a CPU (torch
    emulates it: slow, but it runs the same code path as on a GPU, which the tests use) and
    refused on a CUDA device without bf16 support, where training would fail later.
    """
    import torch

    if name not in DTYPES:
        raise ValueError(f"training dtype must be one of {DTYPES}, got {name!r}")
    cuda = torch.cuda.is_available()
    bf16_ok = cuda and torch.cuda.is_bf16_supported()
    if name == "auto":
        return "bfloat16" if bf16_ok else "float32"
    if name == "bfloat16" and cuda and not bf16_ok:
        raise ValueError("training dtype bfloat16: this CUDA device does not support bf16 "
                         f"({torch.cuda.get_device_name()}); use dtype float32 (or auto)")
    return name


@dataclass
class DpoSettings(TrainSettings):
    beta: float = 0.1  # the paper sweeps {0.1, 0.3, 0.5, 2, 5}
    loss_type: str = "sigmoid"
    nll_weight: float = 0.0
    """> 0: DPO + NLL on the chosen completion with this weight (not the paper's DPO)."""
    weight_decay: float = 0.0  # no weight decay for DPO (Ivison et al.)


@dataclass
class RrhfSettings(TrainSettings):
    rank_weight: float = 0.1  # λ; 0 recovers RAFT
    use_sft: bool = True
    hinge: bool = True
    logistic_weight: bool = True
    sft_token_mean: bool = True  # False: L_ft summed over y_best's tokens


@dataclass
class SftSettings(TrainSettings):
    pass


SETTINGS_OF_METHOD: dict[str, type[TrainSettings]] = {
    "dpo": DpoSettings, "rrhf": RrhfSettings, "sft": SftSettings, "raft": SftSettings}


def settings_for(method: str, training: TrainingSettings) -> TrainSettings:
    """The trainer config of ``method`` from a profile's (or sweep cell's) training section."""
    t = training
    common = {"epochs": t.epochs, "batch_size": t.batch_size,
              "per_device_batch_size": t.per_device_batch_size,
              "learning_rate": t.learning_rate, "max_length": t.max_length, "seed": t.seed,
              "dtype": t.dtype, "gradient_checkpointing": t.gradient_checkpointing,
              "lora": LoraSettings(r=t.lora_r, alpha=t.lora_alpha, dropout=t.lora_dropout)}
    if method == "dpo":
        return DpoSettings(**common, beta=t.dpo_beta, nll_weight=t.dpo_nll_weight)
    if method == "rrhf":
        return RrhfSettings(**common, rank_weight=t.rrhf_rank_weight, use_sft=t.rrhf_use_sft,
                            hinge=t.rrhf_hinge, logistic_weight=t.rrhf_logistic_weight,
                            sft_token_mean=t.rrhf_sft_token_mean)
    if method in SETTINGS_OF_METHOD:
        return SftSettings(**common)
    raise ValueError(f"unknown training method {method!r}; known: {sorted(SETTINGS_OF_METHOD)}")


LOG_NAMES = {"loss": "loss", "rewards/margins": "reward margin",
             "rewards/accuracies": "reward accuracy", "rank_loss": "rank loss",
             "sft_loss": "sft loss", "learning_rate": "learning rate"}
"""The trainers' log keys a reader is shown (progress lines, the adapter's training log), by
the names they are shown under: DPO's reward margin and accuracy, σ-RRHF's two parts."""


def settings_summary(method: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The configuration an adapter was trained with, as a reader names it: ``settings`` is
    the trainer config as a dict (``asdict``, as ``training_config.json`` records it).

    Why one function: the adapter's metadata and the run's tags say the same thing, and
    only the switches of the adapter's own method appear (β for DPO, λ and the σ-RRHF
    ablation switches for σ-RRHF)."""
    lora = settings["lora"]
    out: dict[str, Any] = {
        "learning rate": settings["learning_rate"],
        "batch size": settings["batch_size"],
        "per-device batch": settings["per_device_batch_size"],
        "epochs (max)": settings["epochs"],
        "warmup ratio": settings["warmup_ratio"],
        "weight decay": settings["weight_decay"],
        "max length": settings["max_length"],
    }
    if method == "dpo":
        out.update({"β (DPO)": settings["beta"], "DPO loss": settings["loss_type"],
                    "DPO NLL weight": settings.get("nll_weight", 0.0)})
    if method == "rrhf":
        out.update({"λ (rank weight)": settings["rank_weight"],
                    "σ-RRHF SFT term": settings["use_sft"],
                    "σ-RRHF hinge": settings["hinge"],
                    "σ-RRHF logistic weight": settings["logistic_weight"],
                    "σ-RRHF SFT token mean": settings["sft_token_mean"]})
    out.update({"LoRA r": lora["r"], "LoRA α": lora["alpha"], "LoRA dropout": lora["dropout"],
                "LoRA targets": ", ".join(lora["target_modules"]),
                "seed": settings["seed"], "dtype": settings["dtype"],
                "gradient checkpointing": settings["gradient_checkpointing"]})
    return out


def settings_line(method: str, settings: dict[str, Any]) -> str:
    """``settings_summary`` on one line (a run tag's value, a log line)."""
    parts = [method] + [f"{name} {value}" for name, value in
                        settings_summary(method, settings).items()]
    return " · ".join(parts)
