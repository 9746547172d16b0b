"""The paper's ablations (``training.sweeps``, App. C.2-C.4): each sweep's rows and the cell
they train on. Their names, in table order, are ``SWEEPS`` (``config/profile.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from saturated_dag.config.base import Strict, TrainSplit
from saturated_dag.config.scoring import Scorer

RrhfVariant = Literal["full", "no_sft", "no_hinge", "no_logistic"]


class RankWeightSweep(Strict):
    """Figure 6 (App. C.2): σ-RRHF's rank-loss weight λ on one split; λ=0 is RAFT."""

    split: TrainSplit = "hard"
    scorer: Scorer = "self_judge"
    values: list[float] = Field(default_factory=lambda: [0.0, 0.01, 0.1, 0.5, 1.0],
                                min_length=1)
    zero_replicates: int = Field(3, ge=1, le=16)
    """Training seeds of the λ = 0 row (App. C.2: "the mean of three runs for λ = 0"); never
    fewer than ``training.replicates``. The other rows train ``training.replicates`` seeds."""

    @model_validator(mode="after")
    def _non_negative(self) -> RankWeightSweep:
        if any(v < 0 for v in self.values):
            raise ValueError(f"values: rank weights must be >= 0, got {self.values}")
        return self


class RrhfVariantSweep(Strict):
    """Table 8 (App. C.3): σ-RRHF without the SFT term, the hinge or the logistic weight."""

    split: TrainSplit = "hard"
    scorer: Scorer = "self_judge"
    variants: list[RrhfVariant] = Field(
        default_factory=lambda: ["full", "no_sft", "no_hinge", "no_logistic"], min_length=1)
    rank_weight: float | None = Field(None, ge=0)
    """The λ every variant row holds (the selection never varies it for these rows);
    None: ``training.rrhf_rank_weight`` (the paper's σ-RRHF runs use λ = 0.1). λ = 0 with the
    ``no_sft`` variant would train nothing and is refused."""


class DpoBetaSweep(Strict):
    """Table 9 (App. C.4): DPO's β x learning rate; each cell keeps its best epoch."""

    split: TrainSplit = "strict_saturated"
    scorer: Scorer = "self_judge"
    betas: list[float] = Field(default_factory=lambda: [0.1, 0.3, 0.5, 2.0, 5.0], min_length=1)
    learning_rates: list[float] = Field(default_factory=lambda: [5e-6, 1e-5, 5e-5],
                                        min_length=1)

    @model_validator(mode="after")
    def _positive(self) -> DpoBetaSweep:
        if any(v <= 0 for v in [*self.betas, *self.learning_rates]):
            raise ValueError("betas and learning_rates must be > 0, got "
                             f"{self.betas} and {self.learning_rates}")
        return self


Sweep = RankWeightSweep | RrhfVariantSweep | DpoBetaSweep
"""One configured sweep: every one names the ``split`` and the ``scorer`` its rows train on."""


class SweepSettings(Strict):
    """The paper's ablations, each off (null) unless configured."""

    rank_weight: RankWeightSweep | None = None
    rrhf_variants: RrhfVariantSweep | None = None
    dpo_beta: DpoBetaSweep | None = None
