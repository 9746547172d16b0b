"""One config dataclass per method, with the paper's defaults (App. B, Table 5).

Learning rates and epochs are the paper's for Qwen3-1.7B; the demo profile overrides them for
its small model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    batch_size: int = 8  # questions (σ-RRHF: whole groups) or pairs per optimizer step
    per_device_batch_size: int = 8
    learning_rate: float = 1e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 2048
    seed: int = 0
    logging_steps: int = 1
    lora: LoraSettings = field(default_factory=LoraSettings)

    @property
    def grad_accumulation(self) -> int:
        if self.batch_size % self.per_device_batch_size:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of "
                             f"per_device_batch_size {self.per_device_batch_size}")
        return self.batch_size // self.per_device_batch_size


@dataclass
class DpoSettings(TrainSettings):
    beta: float = 0.1  # the paper sweeps {0.1, 0.3, 0.5, 2, 5}
    loss_type: str = "sigmoid"
    weight_decay: float = 0.0  # no weight decay for DPO (Ivison et al.)


@dataclass
class RrhfSettings(TrainSettings):
    rank_weight: float = 0.1  # λ; 0 recovers RAFT
    use_sft: bool = True
    hinge: bool = True
    logistic_weight: bool = True


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
              "lora": LoraSettings(r=t.lora_r, alpha=t.lora_alpha, dropout=t.lora_dropout)}
    if method == "dpo":
        return DpoSettings(**common, beta=t.dpo_beta)
    if method == "rrhf":
        return RrhfSettings(**common, rank_weight=t.rrhf_rank_weight, use_sft=t.rrhf_use_sft,
                            hinge=t.rrhf_hinge, logistic_weight=t.rrhf_logistic_weight)
    if method in SETTINGS_OF_METHOD:
        return SftSettings(**common)
    raise ValueError(f"unknown training method {method!r}; known: {sorted(SETTINGS_OF_METHOD)}")
