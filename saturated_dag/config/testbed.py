"""The calibrated testbed's analysis (``testbed``): which split's cells it reads and each
verdict's threshold."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from saturated_dag.config.base import Strict, TrainSplit


class TestbedSettings(Strict):
    """The calibrated testbed's analysis (``docs/testbed.md``): the embedded world with a
    planted quality signal, so the instrument is shown to find an effect that exists (each
    method's positive control), to find none where none is (its negative control), and how
    the effect falls as the signal gets noisier (the reliability dial). Chain sum on the
    embedded model only: the oracle reads the solution styles the embedded model was
    pretrained on (``tasks.solution_styles``).

    The rows themselves are ordinary cells of the plan: ``training.scorers`` (and
    ``training.method_scorers``) name the known-answer scorers, ``training.recipes`` chooses
    each method's recipe on its oracle cell, and the graph trains and evaluates them like
    every other cell. This section holds only what the analysis reads: which split's cells,
    and each verdict's threshold."""

    split: TrainSplit = "saturated"
    """The split whose main-matrix cells of chain sum the testbed reads."""
    min_training_questions: int | dict[TrainSplit, int] = 1
    """The analysis refuses a run whose data seed has fewer training questions in a split: a
    number guards ``split``, a mapping each split it names (the study's three). The positive
    control needs a training set of this size to move the model (about 300 in ``testbed``)."""
    positive_min_effect: float = Field(8.0, gt=0)
    """σ-RRHF's positive control passes when σ-RRHF with the oracle gains at least this many
    points of pass@1 with its 95% interval above 0."""
    dpo_min_effect: float = Field(5.0, gt=0)
    """DPO's positive control passes when DPO with the oracle gains at least this many points
    with its 95% interval above 0 (each method is read against its own control)."""
    sft_min_effect: float = Field(3.0, gt=0)
    """SFT's positive control passes when SFT on the oracle's best completion per question
    beats SFT on a random correct completion by at least this many points, interval above 0
    (the study's 3-point resolution): the ranking, not the selection of correct completions,
    must be what SFT learns from."""
    hard_min_effect: float = Field(3.0, gt=0)
    """The hard split's known-signal control (``training.hard_pair_control``) passes when DPO
    on its random correct-vs-incorrect pairs beats DPO on the same pairs half swapped by at
    least this many points of pass@1 over every eval question, interval above 0 (the study's
    3-point resolution)."""
    null_band: float = Field(3.0, gt=0)
    """The negative control passes when its 95% interval contains 0 and lies within
    ±``null_band`` points."""
    analysis: Literal["controls", "dpo_recipe_search"] = "controls"
    """What the analysis asset reads: ``controls``, every method's controls and the dial
    (``chain_sum/testbed_validation``, the ``testbed`` job); ``dpo_recipe_search``, DPO's
    recipe search and diagnosis (``chain_sum/dpo_recipe_search``, the ``dpo_recipe_search``
    job, profiles ``dpo_search`` and ``dpo_diagnosis``): DPO on the oracle and on its shuffled
    scores (and, where the hard split is trained with ``hard_pair_control``, on its random
    pairs and their half-swapped partner), each cell selecting over all its configurations,
    every configuration's validation results and training log read against the base model's
    validation results. DPO's planted-signal control passes at a recipe as it does in the
    ``controls`` analysis (``dpo_min_effect``, ``null_band``), correctness as the hard split's
    control does (``hard_min_effect``)."""

    @field_validator("min_training_questions")
    @classmethod
    def _positive_minimums(cls, value: int | dict[str, int]) -> int | dict[str, int]:
        found = value.values() if isinstance(value, dict) else [value]
        if any(v < 1 for v in found):
            raise ValueError(f"{value}: a split's minimum must be at least 1")
        return value

    def minimums(self) -> dict[str, int]:
        """``min_training_questions`` per split it guards."""
        guard = self.min_training_questions
        return dict(guard) if isinstance(guard, dict) else {self.split: guard}
