"""How the policy samples and what its samples make: the sampling itself (``sampling``), the
eval replicates (``evaluation``) and the difficulty partitions (``partitions``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from saturated_dag.config.base import Strict
from saturated_dag.generation.base import SamplingParams


class SamplingSettings(Strict):
    """The paper's sampling (App. B.1)."""

    n: int = Field(8, ge=1)
    temperature: float = Field(0.6, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_new_tokens: int = Field(2048, ge=1)
    seed: int = Field(0, ge=0)

    def params(self) -> SamplingParams:
        return SamplingParams(**self.model_dump())


class EvaluationSettings(Strict):
    """Eval replicates (not in the paper, which evaluates once: ``replicates: 1``).

    Replicate r samples the eval set again with sampling seed ``sampling.seed + r``; every
    table reports the mean over replicates with intervals that resample them
    (``docs/statistics.md``). Replicate 0 is the single evaluation of ``replicates: 1``.
    """

    replicates: int = Field(1, ge=1, le=64)
    adapters_per_pass: int = Field(8, ge=1, le=64)
    """Eval reports sampled side by side in one batched decoding pass: a report's training
    and eval replicates share the base model's forward, each row with its own LoRA adapter
    (vLLM: one ``generate`` with a LoRA request per prompt). Not the paper's concern; the
    samples are the same either way (per-row seeds). ``1``: each adapter merged into its own
    copy of the base model and sampled alone (needed for adapters the multi-adapter forward
    refuses, e.g. DoRA)."""


class PartitionSettings(Strict):
    """App. A.1: saturated p=1, hard p<=1/4, the middle excluded."""

    saturated_min_pass: float = Field(1.0, gt=0, le=1)
    hard_max_pass: float = Field(0.25, ge=0, lt=1)

    @model_validator(mode="after")
    def _ordered(self) -> PartitionSettings:
        if self.hard_max_pass >= self.saturated_min_pass:
            raise ValueError(
                f"hard_max_pass ({self.hard_max_pass}) must be below saturated_min_pass "
                f"({self.saturated_min_pass})"
            )
        return self
