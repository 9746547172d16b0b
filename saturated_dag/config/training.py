"""The training section (``training``, App. B, Table 5): the matrix of splits, methods and
scorers, each method's settings, the selection protocol and the recipes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from saturated_dag.config.base import Strict, TrainSplit
from saturated_dag.config.scoring import Scorer
from saturated_dag.config.sweeps import SweepSettings
from saturated_dag.config.tasks import MAX_PER_CELL

Method = Literal["dpo", "rrhf", "sft", "raft"]

DpoLossType = Literal["sigmoid", "ipo", "hinge", "apo_zero", "apo_down", "nca_pair", "bco_pair",
                      "sppo_hard", "discopop"]
"""The DPO losses a profile may set (``training.dpo_loss_type``): TRL's ``DPOConfig.loss_type``
values that compare one chosen with one rejected completion and read no setting this project
does not hold. Left out: ``robust`` and ``exo_pair`` (they read ``label_smoothing``, which
the sigmoid loss reads as cDPO too, so a grid over loss types could not hold it for them
alone), ``aot``/``aot_unpaired`` (batch-level sorting), ``sigmoid_norm`` and ``sft`` (the NLL
anchor is ``dpo_nll_weight``)."""


class SelectionSettings(Strict):
    """The paper's selection protocol (App. B, Table 5): the lists of values a cell's
    configurations take. Every cell of the matrix trains each configuration (each combination
    of the listed values) and reports the one with the best validation pass@1.

    A list left out (null) is the ``training`` section's own single value, so with no list each cell
    trains one configuration. ``epochs`` are separate runs, each with its own cosine
    schedule (and, within it, the best epoch's checkpoint). ``dpo_betas`` apply to DPO cells,
    ``rrhf_rank_weights`` to σ-RRHF cells; a setting a sweep row fixes (its λ, β, learning rate,
    σ-RRHF switches) is never varied for that row, whatever its value (equal to the ``training``
    value or not). ``rrhf_rank_weights`` is off in ``paper``: Table 2's caption and App. C.1 report
    σ-RRHF at λ = 0.1, and λ is Figure 6's sweep; setting it selects λ per σ-RRHF cell instead, the
    other reading of App. B (``docs/paper-differences.md``). ``batch_sizes`` a method cannot use
    (σ-RRHF: fewer than a question's ``n`` completions, or not a multiple of
    ``per_device_batch_size``) are skipped for it.
    """

    learning_rates: list[float] | None = Field(None, min_length=1)
    epochs: list[int] | None = Field(None, min_length=1)
    batch_sizes: list[int] | None = Field(None, min_length=1)
    dpo_betas: list[float] | None = Field(None, min_length=1)
    dpo_nll_weights: list[float] | None = Field(None, min_length=1)
    """DPO's NLL anchor weights (``training.dpo_nll_weight``; 0 is the paper's DPO)."""
    dpo_loss_types: list[DpoLossType] | None = Field(None, min_length=1)
    """DPO's loss types (``training.dpo_loss_type``; ``sigmoid`` is the paper's DPO), varied
    on the DPO cells ranked by a scorer; the hard split's correctness pairs keep the profile's
    own loss (``experiments.correctness_pins``)."""
    rrhf_rank_weights: list[float] | None = Field(None, min_length=1)
    rule: Literal["best", "one_se"] = "best"
    """How a selection chooses (``saturated_dag.training.selection``): ``best`` is App. B's highest
    validation pass@1; ``one_se`` the one-standard-error rule, the smallest learning rate
    within one paired standard error of the best (docs/paper-differences.md): on the testbed
    the validation set's noise alone chose η = 1e-3 over 3e-4 (93.2% against 92.7%), and at
    1e-3 the shuffled and random controls lost 2-3 points."""

    @model_validator(mode="after")
    def _ranges(self) -> SelectionSettings:
        for name, low, strict in (("learning_rates", 0, True), ("dpo_betas", 0, True),
                                  ("dpo_nll_weights", 0, False),
                                  ("rrhf_rank_weights", 0, False), ("batch_sizes", 1, False)):
            values = getattr(self, name) or []
            bad = [v for v in values if (v <= low if strict else v < low)]
            if bad:
                raise ValueError(f"{name}: {bad} out of range (must be "
                                 f"{'>' if strict else '>='} {low})")
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: {values} repeats a value")
        if self.dpo_loss_types is not None and len(set(self.dpo_loss_types)) != len(
                self.dpo_loss_types):
            raise ValueError(f"dpo_loss_types: {self.dpo_loss_types} repeats a value")
        if self.epochs is not None:
            if any(not 1 <= e <= 4 for e in self.epochs) or len(set(self.epochs)) != len(
                    self.epochs):
                raise ValueError(f"epochs: {self.epochs} must be distinct values in 1..4")
        return self


class RecipeSettings(Strict):
    """One recipe per method, chosen where the answer is known (the calibrated testbed,
    docs/testbed.md): the method's cell ranked by ``scorer`` (the positive control; SFT's own
    cell, which ranks nothing) trains all its configurations, its selection chooses by
    ``selection.rule``, and every other main-matrix cell of the method trains the chosen
    configuration over its training seeds. A row then differs from the positive control only
    in its scores. The recipe is an input of those cells' adapter assets, so the lineage shows
    it, and a new choice retrains them (their cache key holds the recipe)."""

    scorer: Scorer = "oracle"
    split: TrainSplit | None = None
    """The split whose cells choose the recipes. None: each split's own cells choose that
    split's recipes (every split must then have the method's ``scorer`` cell). A split: its
    cells choose every split's (the study: the hard split has no oracle cell, and one recipe
    per method, chosen on its positive control, keeps each row differing from that control
    in its data and scores only). A sweep row trains its method's recipe too, less the
    settings the row fixes itself (Figure 6's λ, Table 9's β and η)."""
    borrow: dict[Method, Method] = Field(default_factory=lambda: {"raft": "sft"})
    """Methods that train another method's recipe: RAFT is SFT on one completion per question,
    and SFT's two controls (RAFT on the oracle's best and on a random correct completion)
    must train SFT's recipe to say something about SFT."""

    @model_validator(mode="after")
    def _no_chains(self) -> RecipeSettings:
        chained = [m for m, source in self.borrow.items() if source in self.borrow or m == source]
        if chained:
            raise ValueError(f"borrow: {chained} borrow from a method that borrows itself; "
                             "each must name a method that selects its own recipe")
        return self


class TrainingSettings(Strict):
    """LoRA training (App. B, Table 5). Defaults are the paper's for Qwen3-1.7B-Base."""

    splits: list[TrainSplit] = Field(default_factory=lambda: ["saturated", "strict_saturated"],
                                     min_length=1)
    """At least one: an empty list would train nothing and leave the tables empty."""
    scorers: list[Scorer] = Field(
        default_factory=lambda: ["self_judge", "strong_judge", "entropy", "random"])
    methods: list[Method] = Field(default_factory=lambda: ["dpo", "rrhf", "sft"], min_length=1)
    """raft (SFT on each scorer's argmax, App. C.2's λ=0) is available but off by default."""
    epochs: int = Field(4, ge=1, le=4)
    batch_size: int = Field(8, ge=1)
    """Training examples per optimizer step, as the paper's Table 5 counts them: completions
    (sequences) for SFT, RAFT and σ-RRHF (a question contributes its scored completions),
    preference pairs for DPO (TRL's convention). Reached by gradient accumulation."""
    per_device_batch_size: int = Field(8, ge=1)
    """Examples per forward pass. σ-RRHF packs whole questions, so it must be at least
    ``sampling.n`` (App. B: all completions of a question in the same batch)."""
    learning_rate: float = Field(1e-5, gt=0)
    max_length: int = Field(2048, ge=16)
    """Prompt plus completion tokens (Table 5: L = 2048)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Training precision: auto is bfloat16 where the device supports it (CUDA), else float32."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward (long sequences on a GPU); off on the small CPU model."""
    dpo_distinct_texts: bool = False
    """Not in the paper: when y_l's text equals y_w's, take the lowest-scored completion with a
    different text instead (a pair of equal texts has zero DPO gradient). Off: the paper's
    y_w = argmax, y_l = argmin with random tie-breaks."""
    lora_r: int = Field(32, ge=1)
    lora_alpha: int = Field(64, ge=1)
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    dpo_beta: float = Field(0.1, gt=0)
    dpo_nll_weight: float = Field(0.0, ge=0)
    """Not in the paper (docs/paper-differences.md): > 0 adds an NLL term on the chosen
    completion to DPO's loss with this weight (TRL's ``loss_type=["sigmoid", "sft"]`` with
    ``loss_weights=[1, w]``), the anchor σ-RRHF's SFT term gives it. 0: the paper's DPO."""
    dpo_loss_type: DpoLossType = "sigmoid"
    """DPO's loss, TRL's ``DPOConfig.loss_type``: ``sigmoid`` is the DPO paper's (the paper's
    DPO, every shipped profile's). The others are options (docs/paper-differences.md): ``ipo``
    and ``hinge`` reshape the margin alone; ``apo_zero``, ``apo_down``, ``nca_pair``,
    ``bco_pair``, ``sppo_hard`` and ``discopop`` also put a term on each completion's own
    log-ratio (``DpoLossType``)."""
    rrhf_rank_weight: float = Field(0.1, ge=0)
    rrhf_use_sft: bool = True
    rrhf_hinge: bool = True
    rrhf_logistic_weight: bool = True
    rrhf_sft_token_mean: bool = True
    """L_ft as y_best's mean token NLL (RRHF's and the authors' code); False: the summed NLL,
    −log π(y_best | x) as the paper's equation writes it (docs/paper-differences.md)."""
    validation_batch_size: int = Field(64, ge=1)
    """Rows per batch when the training process samples its validation set (transformers, on
    the training device, beside the trainer). Not ``policy.batch_size``, the vLLM engine's
    (1,024 in ``paper``): 1,024 rows of up to 2,048 new tokens under transformers would need
    about 250 GB of KV cache for Qwen3-1.7B. Samples do not depend on it (per-row seeds), so
    it is not part of an adapter's cache key."""
    validation_questions_per_cell: int = Field(8, ge=1, le=MAX_PER_CELL)
    """Chain sum: a held-out validation pool per D cell, for checkpoint selection."""
    gsm8k_validation_questions: int = Field(100, ge=1)
    """GSM8K: the last lines of train.jsonl, held out of the generation pool."""
    seed: int = Field(0, ge=0)
    """Training seed of replicate 0 (LoRA initialisation, data order); replicate r uses
    ``seed + r``."""
    replicates: int = Field(1, ge=1, le=16)
    """Training-seed replicates: each configuration is trained this many times, with seeds
    ``seed``, ``seed + 1``, ...; selection uses their mean validation pass@1 and the tables
    resample them (docs/statistics.md)."""
    isolate: bool = True
    """Train each adapter in its own process (vLLM does not reliably free GPU memory)."""
    method_scorers: dict[Method, list[Scorer]] = Field(default_factory=dict)
    """A method's own scorers, replacing ``scorers`` for its main-matrix rows (the testbed
    trains DPO on the dial only, and SFT's two controls as RAFT with the oracle and random).
    A method given ``null`` is dropped: a profile that ``extends`` another can take a
    method's entry away (``dpo_search`` trains no RAFT)."""
    hard_pair_control: bool = False
    """Not in the paper (docs/paper-differences.md): on the hard split, DPO also trains on
    shuffled correctness pairs (``dpo_correctness_shuffled``: the random pairs with chosen and
    rejected swapped on half the questions). With ``dpo_correctness_random`` it makes the hard
    split's known-signal control, read by the testbed's analysis: DPO must learn correctness
    from the random pairs before a null of the hard split's DPO rows can be read."""
    selection: SelectionSettings = SelectionSettings()
    recipes: RecipeSettings | None = None
    """None: every cell selects its own configuration (App. B). Set: each method's recipe is
    selected on one cell and its other cells train that recipe (the testbed, the study)."""
    sweeps: SweepSettings = SweepSettings()

    @field_validator("method_scorers", mode="before")
    @classmethod
    def _drop_null_methods(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value

    @model_validator(mode="after")
    def _batches(self) -> TrainingSettings:
        if self.batch_size % self.per_device_batch_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of "
                             f"per_device_batch_size ({self.per_device_batch_size})")
        return self

    @model_validator(mode="after")
    def _method_scorers_of_trained_methods(self) -> TrainingSettings:
        unknown = sorted(set(self.method_scorers) - set(self.methods))
        if unknown:
            raise ValueError(f"method_scorers names {unknown}, which methods does not train; "
                             f"methods are {self.methods}")
        unranked = [m for m in self.method_scorers if m == "sft"]
        if unranked:
            raise ValueError("method_scorers.sft: SFT ranks nothing (it trains on every "
                             "correct completion); RAFT is SFT on a scorer's best")
        if self.recipes is not None:
            if self.recipes.split is not None and self.recipes.split not in self.splits:
                raise ValueError(f"recipes.split: {self.recipes.split!r} chooses the recipes, "
                                 f"but splits {self.splits} does not train it")
            for method, source in self.recipes.borrow.items():
                if method in self.methods and source not in self.methods:
                    raise ValueError(f"recipes.borrow: {method} trains {source}'s recipe, "
                                     f"but methods {self.methods} has no {source}")
        return self

    @model_validator(mode="after")
    def _ranked_methods_have_scorers(self) -> TrainingSettings:
        ranked = sorted(set(self.methods) - {"sft"})
        if ranked and not self.scorers:
            raise ValueError(f"scorers is empty, but methods {ranked} rank completions by a "
                             "scorer and would train nothing: name at least one scorer, or "
                             "train only sft")
        return self
