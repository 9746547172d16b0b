"""Profiles: plain YAML a user can copy and edit, validated before any model loads.

``load_profile("demo")`` reads ``saturated_dag/profiles/demo.yaml``; any other argument is a
path to a YAML file of the same shape. Every error names the field, the bad value and what
is allowed (pydantic's message), prefixed with the profile it came from.

Three rules hold for every field (issue 15): a number must be finite (``.inf``/``.nan`` are
never a setting anyone means), a boolean is accepted only where the field is a boolean (pydantic
alone would read ``n: true`` as ``n=1``), and ``trust_remote_code`` is granted only by the
profile file, for the model it names, never by an override (``load_profile``).
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from saturated_dag.generation.base import SamplingParams
from saturated_dag.tasks import chain_sum
from saturated_dag.tasks.chain_sum import grid_of
from saturated_dag.tasks.verification import AnswerCheck

TaskName = Literal["chain_sum", "gsm8k"]


class ProfileError(ValueError):
    """An invalid profile or run config."""


def _admits_bool(tp: Any) -> bool:
    """Whether a field of type ``tp`` means to hold a boolean (``bool``, ``bool | None``)."""
    if tp is bool or tp is Any:
        return True
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(_admits_bool(arm) for arm in get_args(tp))
    if origin is Literal:
        return any(isinstance(v, bool) for v in get_args(tp))
    return False


def _item_types(tp: Any, length: int) -> list[Any] | None:
    """The annotations of a list/tuple field's items (the first sequence arm of a union)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for arm in get_args(tp):
            found = _item_types(arm, length)
            if found is not None:
                return found
        return None
    args = get_args(tp)
    if origin is list and args:
        return [args[0]] * length
    if origin is tuple and args:
        return [args[0]] * length if args[-1] is Ellipsis else list(args)[:length]
    return None


def _type_text(tp: Any) -> str:
    """What a field allows, for the error message (``an integer``, ``one of [1, 8, ...]``)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_text(arm) for arm in get_args(tp) if arm is not type(None))
    if origin is Literal:
        return f"one of {list(get_args(tp))}"
    if origin in (list, tuple):
        return "a list"
    return {int: "an integer", float: "a number", str: "a string"}.get(tp, getattr(
        tp, "__name__", str(tp)))


def _misplaced_bool(value: Any, tp: Any, where: str = "") -> tuple[str, Any] | None:
    """The first boolean in ``value`` where ``tp`` expects none: (item path, expected type).
    Nested models are left to their own validator (it runs when they validate)."""
    if _admits_bool(tp):
        return None
    if isinstance(value, bool):
        return where, tp
    if isinstance(value, (list, tuple)):
        items = _item_types(tp, len(value))
        for i, (item, item_tp) in enumerate(zip(value, items or [], strict=False)):
            found = _misplaced_bool(item, item_tp, f"{where}[{i}]")
            if found is not None:
                return found
    return None


class _Strict(BaseModel):
    """The shared base: no unknown keys, no infinities or NaN in any float (``allow_inf_nan``
    applies to every float field, lists of floats included), no boolean where a number or any
    other non-boolean type is expected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_non_bool(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic's lax mode reads ``true`` as 1 for ``int``, ``float`` and ``Literal[1, ...]``
        fields (``sampling: {n: true}`` would sample once); a YAML boolean there is a mistake.
        Strict int types would do the same for scalars but not inside ``tuple[int, int]``
        without ``Annotated`` items, which the Dagster override generator does not read."""
        if info.field_name is None:
            return value
        tp = cls.model_fields[info.field_name].annotation
        found = _misplaced_bool(value, tp)
        if found is not None:
            where, expected = found
            raise PydanticCustomError(
                "bool_not_allowed",
                "a boolean is not allowed {where}: expected {expected} (YAML true/false is a "
                "boolean, not 1/0; write the value itself)",
                {"where": f"at {info.field_name}{where}" if where else "here",
                 "expected": _type_text(expected)})
        return value


GRID_LIMIT = 99
"""The largest number of terms or digits a chain-sum cell may have."""


class GridSpec(_Strict):
    """Inclusive ranges of terms and digits, minus excluded (terms, digits) cells."""

    terms: tuple[int, int]
    digits: tuple[int, int]
    exclude: list[tuple[int, int]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _in_range(self) -> GridSpec:
        """reasoning-gym's chain sum takes 1-99 terms and digits; a range outside it, or
        reversed, fails at the pool step hours later, so it is refused here."""
        for name in ("terms", "digits"):
            low, high = getattr(self, name)
            if not 1 <= low <= high <= GRID_LIMIT:
                raise ValueError(f"{name}: [{low}, {high}] must be an increasing range within "
                                 f"1-{GRID_LIMIT}")
        return self

    def points(self) -> list[chain_sum.GridPoint]:
        """The grid's (terms, digits) points, row-major, without ``exclude``."""
        return chain_sum.grid_points(self.terms, self.digits, self.exclude)


Grid = Literal["D", "D_prime"] | GridSpec


_MAX_PER_CELL = chain_sum.SEED_SPACING // 100
TrainSplit = Literal["saturated", "strict_saturated", "hard"]
DpoLossType = Literal["sigmoid", "ipo", "hinge", "apo_zero", "apo_down", "nca_pair", "bco_pair",
                      "sppo_hard", "discopop"]
"""The DPO losses a profile may set (``training.dpo_loss_type``): TRL's ``DPOConfig.loss_type``
values that compare one chosen with one rejected completion and read no setting this project
does not hold. Left out: ``robust`` and ``exo_pair`` (they read ``label_smoothing``, which
the sigmoid loss reads as cDPO too, so a grid over loss types could not hold it for them
alone), ``aot``/``aot_unpaired`` (batch-level sorting), ``sigmoid_norm`` and ``sft`` (the NLL
anchor is ``dpo_nll_weight``)."""
TRAIN_SPLITS_HELP = """The training splits this task trains, main rows and sweeps alike: a row
whose split is not listed has no assets for this task (a listed split no row trains adds
nothing). None: every split ``training`` trains. The paper trains GSM8K on Q_easy only (Sec.
4.3, Table 2): App. C's hard split, Table 7 and the ablations are chain sum's (``paper``:
``gsm8k.train_splits: [saturated]``)."""


class ChainSumSettings(_Strict):
    """The target pool D, the strictly easier pool D_prime and the held-out eval set."""

    grid: Grid = "D"
    questions_per_cell: int = Field(3000, ge=1, le=_MAX_PER_CELL)
    strict_grid: Grid | None = "D_prime"
    strict_questions_per_cell: int = Field(3000, ge=1, le=_MAX_PER_CELL)
    eval_grid: Grid | None = None  # None: the grid of D
    eval_questions_per_cell: int = Field(8, ge=1, le=_MAX_PER_CELL)
    eval_source: str | None = None
    """The paper's fixed eval set instead of a generated one: a hub id
    (``hannoh/chainsum_eval``, 200 questions), a ``datasets``-loadable folder or a JSONL file
    with the same columns. None: ``eval_questions_per_cell`` questions drawn per eval cell."""
    eval_limit: int | None = Field(None, ge=1)
    """With ``eval_source``: evaluate its first ``eval_limit`` rows (the paper: 200)."""
    seed: int = Field(0, ge=0)
    train_splits: list[TrainSplit] | None = Field(None, min_length=1,
                                                  description=TRAIN_SPLITS_HELP)

    @model_validator(mode="after")
    def _grids_not_empty(self) -> ChainSumSettings:
        for name in ("grid", "strict_grid", "eval_grid"):
            grid = getattr(self, name)
            if grid is not None:
                try:
                    grid_of(grid)
                except ValueError as err:
                    raise ValueError(f"{name}: {err}") from None
        return self


class Gsm8kSettings(_Strict):
    """Local folder with train.jsonl/test.jsonl (relative to the working directory) or hub id."""

    source: str = "../shared/data/gsm8k"
    train_limit: int | None = Field(None, ge=1)
    test_limit: int | None = Field(None, ge=1)
    train_splits: list[TrainSplit] | None = Field(None, min_length=1,
                                                  description=TRAIN_SPLITS_HELP)


class VllmSettings(_Strict):
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    enforce_eager: bool = False
    max_model_len: int | Literal["auto"] | None = None
    """The engine's context in tokens. ``auto``: computed when the engine starts, from the
    profile and the model's tokenizer, as the longest prompt it will serve plus what it
    generates (for the policy: the self-judge's few-shot prompt with the task's longest
    question, two completions of ``sampling.max_new_tokens`` and a judgment of
    ``scoring.judge_max_new_tokens``; ``saturated_dag.profiles.engine_context``). A number
    smaller than that is refused, with the numbers, before the engine loads. None: the
    model's own maximum (vLLM's default)."""
    tensor_parallel_size: int = Field(1, ge=1)
    enable_prefix_caching: bool = True
    enable_lora: bool = False
    """Serve adapters as LoRA requests on the policy's engine (eval without reloading)."""
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 64
    max_loras: int = Field(1, ge=1)


class PolicySettings(_Strict):
    """The policy model and the backend that serves it."""

    backend: Literal["transformers", "vllm"] = "transformers"
    model: str
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    batch_size: int = Field(64, ge=1)
    chat_template: Literal["auto", "always", "never"] = "auto"
    enable_thinking: bool | None = None
    """Passed to chat templates that know it (Qwen3 hybrid models): False samples without a
    ``<think>`` block. None: the template's own default. Ignored without a chat template."""
    trust_remote_code: bool = False
    vllm: VllmSettings = VllmSettings()


class SamplingSettings(_Strict):
    """The paper's sampling (App. B.1)."""

    n: int = Field(8, ge=1)
    temperature: float = Field(0.6, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_new_tokens: int = Field(2048, ge=1)
    seed: int = Field(0, ge=0)

    def params(self) -> SamplingParams:
        return SamplingParams(**self.model_dump())


class EvaluationSettings(_Strict):
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
    copy of the base model and sampled alone, as before (needed for adapters the multi-adapter
    forward refuses, e.g. DoRA)."""


class PartitionSettings(_Strict):
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


class SelfJudgeSettings(_Strict):
    """The self-judge: the policy model itself (the ``policy`` backend) judging pairs."""

    instruct: bool = False
    """False: the full few-shot prompt (base models); True: the system/user pair (App. D)."""


class StrongJudgeSettings(_Strict):
    """The strong judge: the chain-sum rubric, or any LLM on its own backend."""

    kind: Literal["rubric", "llm"] = "rubric"
    backend: Literal["transformers", "vllm"] = "transformers"
    model: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    batch_size: int = Field(16, ge=1)
    chat_template: Literal["auto", "always", "never"] = "auto"
    trust_remote_code: bool = False
    instruct: bool = True
    vllm: VllmSettings = VllmSettings()

    @model_validator(mode="after")
    def _llm_needs_model(self) -> StrongJudgeSettings:
        if self.kind == "llm" and not self.model:
            raise ValueError("kind 'llm' needs a model (local folder, short name or hub id)")
        return self


class JudgeSettings(_Strict):
    """The two pairwise judges of Sec. 3.2 / App. D."""

    self_judge: SelfJudgeSettings = SelfJudgeSettings()
    strong: StrongJudgeSettings = StrongJudgeSettings()


ScoredSplit = Literal["saturated", "hard", "middle", "strict_saturated", "strict_excluded"]


KnownAnswerScorer = Literal["oracle", "oracle_rho75", "oracle_rho50", "oracle_rho25",
                            "oracle_rho0", "oracle_shuffled"]
"""The embedded world's known-answer scorers (``scorers/oracle.py``): the oracle, its
reliability dial (ρ 0.75 ... 0 with the oracle) and its within-question shuffle."""
def _registered_scorer(name: str) -> str:
    """A scorer name must be in the scorer registry (``saturated_dag.scorers.registry``)."""
    from saturated_dag.scorers.registry import check_name

    return check_name(name)


def _scorer_applies(name: str, field: str, tasks: list[str]) -> None:
    """A scorer registered for some tasks only cannot rank rows of a profile with others
    (the built-ins' task rules are the validators' own)."""
    from saturated_dag.scorers.registry import SCORERS

    spec = SCORERS.get(name)
    if spec is not None and not all(spec.applies_to(task) for task in tasks):
        raise ValueError(f"{field}: scorer {name!r} scores {', '.join(spec.tasks or ())} "
                         f"only; the profile's tasks are {tasks}")


Scorer = Annotated[str, AfterValidator(_registered_scorer)]
"""Every scorer a training row can rank by: a name in the scorer registry (the paper's four,
the known-answer ones, and any a project registers, ``docs/extending.md``); the known-answer
ones need ``scoring.known_answer_scorers`` (chain sum on the embedded model only)."""


class ScoringSettings(_Strict):
    """Which completions get quality scores, and the scorers' knobs (Sec. 3.2, App. B.3)."""

    correct_splits: list[ScoredSplit] = Field(
        default_factory=lambda: ["saturated", "strict_saturated"])
    """Splits whose correct completions are scored (questions with < 2 correct are skipped)."""
    all_completion_splits: list[ScoredSplit] = Field(default_factory=lambda: ["hard"])
    """Splits whose every completion (correct or not) is scored, for questions with p-hat > 0."""
    epsilon: float = Field(1e-8, gt=0)
    """Entropy score r = 1 / max(H-bar, epsilon)."""
    entropy_include_eos: bool = True
    """H-bar averages over the generated tokens including the EOS that ended the completion
    (the EOS is a sampled token). False: the completion's text tokens only, computed
    teacher-forced under the policy (the generation pass records only the mean with EOS)."""
    both_orders: bool = False
    """Judge each pair in both orders and average (cancels position bias; off in the paper)."""
    random_seed: int = Field(0, ge=0)
    judge_max_new_tokens: int = Field(1024, ge=1)
    judge_batch_size: int = Field(16, ge=1)
    """Comparisons per batch on the transformers judge route."""
    known_answer_scorers: list[KnownAnswerScorer] = Field(default_factory=list)
    """Known-answer scorers scored beside the four on chain sum (another task has none: they
    read the embedded model's solution styles; ``docs/testbed.md``): each is an asset
    ``chain_sum/<name>_scores`` that joins the scorer agreement table, so every real scorer's
    agreement with the oracle is measured on the run's own completions, and that
    ``training.scorers`` may name when chain sum is the profile's only task."""

    @model_validator(mode="after")
    def _disjoint(self) -> ScoringSettings:
        both = set(self.correct_splits) & set(self.all_completion_splits)
        if both:
            raise ValueError(f"splits {sorted(both)} are in both correct_splits and "
                             "all_completion_splits")
        return self


Method = Literal["dpo", "rrhf", "sft", "raft"]


RrhfVariant = Literal["full", "no_sft", "no_hinge", "no_logistic"]


class RankWeightSweep(_Strict):
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


class RrhfVariantSweep(_Strict):
    """Table 8 (App. C.3): σ-RRHF without the SFT term, the hinge or the logistic weight."""

    split: TrainSplit = "hard"
    scorer: Scorer = "self_judge"
    variants: list[RrhfVariant] = Field(
        default_factory=lambda: ["full", "no_sft", "no_hinge", "no_logistic"], min_length=1)
    rank_weight: float | None = Field(None, ge=0)
    """The λ every variant row holds (the selection never varies it for these rows);
    None: ``training.rrhf_rank_weight`` (the paper's σ-RRHF runs use λ = 0.1). λ = 0 with the
    ``no_sft`` variant would train nothing and is refused."""


class DpoBetaSweep(_Strict):
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


class SweepSettings(_Strict):
    """The paper's ablations, each off (null) unless configured."""

    rank_weight: RankWeightSweep | None = None
    rrhf_variants: RrhfVariantSweep | None = None
    dpo_beta: DpoBetaSweep | None = None


class SelectionSettings(_Strict):
    """The paper's selection protocol (App. B, Table 5): the lists of values a cell's
    configurations take. Every cell of the matrix trains each configuration (each combination
    of the listed values) and reports the one with the best validation pass@1.

    A list left out (null) is the ``training`` section's own single value, so with no list each cell
    trains one configuration, as before. ``epochs`` are separate runs, each with its own cosine
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


class RecipeSettings(_Strict):
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


class TrainingSettings(_Strict):
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
    validation_questions_per_cell: int = Field(8, ge=1, le=_MAX_PER_CELL)
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

    @field_validator("method_scorers", mode="before")
    @classmethod
    def _drop_null_methods(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value
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


class TestbedSettings(_Strict):
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


class ExecutionSettings(_Strict):
    """How many model steps a run executes at once on CPU (``saturated_dag/infra/parallel.py``).

    On an accelerator a run is always one process (the engine loads once) with one model step
    at a time per device; this setting is read only when every model is on the CPU.
    """

    model_steps: Literal["one_at_a_time", "one_per_core"] = "one_at_a_time"
    """``one_at_a_time``: the run's own process, one model step at a time on every core's
    thread (the in-process executor; the gpu concurrency limit has one slot). ``one_per_core``: the
    multiprocess executor, as many model steps at once as there are cores, each a process of
    its own with one torch thread (the limit has a slot per core). Measured on the demo
    (2 cores, bbd3ea7, ``CHANGELOG.md``, "Benchmark history"): one at a time 273 s of run, one
    per core 356 s (1.30x), because Dagster starts a process per step (about 1.1 s each, 176
    steps) and most of the demo's steps last 1 to 4 s. ``one_per_core`` pays where steps are
    few and long."""


class AutomationSettings(_Strict):
    """What the automation sensors may start by themselves (``assets/automation.py``).

    CPU assets (partitions, datasets, tables, agreement) always follow their upstream data and
    their own code; GPU assets (pool, judges, entropy, adapters, eval reports) run by
    themselves only when missing or when upstream data changed.
    """

    gpu_on_code_change: bool = False
    """True: a GPU asset whose code version changed (an edit to any module it imports) is
    re-run by the ``automation_gpu`` sensor too. Off in every shipped profile: one edit to a
    widely imported module would otherwise queue every pool, judge and adapter of the profile
    (``paper`` has over 60 adapters) the moment the code location reloads."""


class StageSettings(_Strict):
    """Resumable, cached stages (``saturated_dag.infra.shards``): generation, judging, entropy,
    eval.

    Finished shards are kept under ``<output_dir>/stages/<stage>/<key>/``; a crashed run
    resumes from them and an unchanged re-run reuses them all.
    """

    shard_questions: int = Field(64, ge=1)
    """Questions per shard: a crash costs at most one shard of work."""
    cache: bool = True
    """False: shards are computed in memory only (same plan and seeds, nothing reused)."""


TRACKING_STORE = "mlflow.db"
"""The default MLflow store's file under the output folder (``TrackingSettings.uri``)."""


class TrackingSettings(_Strict):
    """Experiment tracking in MLflow (``docs/tracking.md``), off unless a profile asks for it.

    Why opt-in: tracking needs the ``mlflow`` extra, and the runs table (each task's
    ``runs_table`` asset) already holds every number; MLflow adds the comparison across
    profiles, commits and nights in ``mlflow ui``. No server: the default store is a SQLite
    file in the output folder.
    """

    mlflow: bool = False
    """True: each task's ``runs_table`` logs one MLflow run per trained adapter (its
    hyperparameters, validation and eval numbers, ``training_config.json``), and the trainers
    report their per-step logs to MLflow (``report_to``)."""
    tracking_uri: str | None = Field(None, min_length=1)
    """Where the runs go: any MLflow tracking URI (``sqlite:///...``, a folder, a server's
    ``http://...``). None: ``sqlite:///<output_dir>/mlflow.db``, beside the profile's outputs."""
    experiment: str = Field("saturated-dag", min_length=1)
    """The MLflow experiment every profile logs to, so one ``mlflow ui`` compares them; the
    runs' tags say which profile, task and commit each is."""

    @property
    def report_to(self) -> str:
        """TRL's / transformers' ``report_to``: ``"mlflow"`` when tracking is on, else
        ``"none"`` (no integration is looked up, nothing is imported)."""
        return "mlflow" if self.mlflow else "none"

    def uri(self, output_dir: str | Path) -> str:
        """The tracking URI: ``tracking_uri``, or the SQLite store in ``output_dir`` (made
        absolute, so the trainer's child process and ``mlflow ui`` find the same file)."""
        if self.tracking_uri is not None:
            return self.tracking_uri
        folder = Path(output_dir).expanduser().resolve()
        return f"sqlite:///{folder / TRACKING_STORE}"


class Profile(_Strict):
    name: str
    description: str = ""
    key_prefix: str | None = Field(None, pattern=r"^[a-z][a-z0-9_]*$")
    """The first part of every asset key of the profile's graph (``testbed`` gives
    ``testbed/chain_sum/results_table``), so that profiles whose runs share one Dagster
    instance never write the same asset key: README's UI shows the demo, the testbed and the
    study side by side (``workspace.yaml``). None: keys start with the task
    (``chain_sum/results_table``). Files are laid out by the unprefixed key either way
    (each profile has its own output folder)."""
    tasks: list[TaskName] = Field(min_length=1)
    data_seeds: int = Field(1, ge=1, le=16)
    """The data's draws (``docs/statistics.md``): data seed d draws chain sum's training
    questions from item ranges of their own (``tasks.chain_sum.draw_seed``), samples the
    generation pool with ``sampling.seed + d`` and makes the scorers' random choices with
    ``scoring.random_seed + d`` (``for_data_seed``). Pools, difficulty partitions, scores and
    datasets exist once per data seed (a Dagster partition each, when there are several),
    every configuration trains on every draw, and the intervals resample data seeds, then
    training seeds, then questions.
    The eval and validation sets are one, drawn around every draw's training questions, so
    every row is paired on the same questions. GSM8K's training questions are the file's, so
    its draws differ in their sampled completions only."""
    data_seed: int = Field(0, ge=0)
    """The draw this copy of the profile is for: set by the graph for each data-seed
    partition (``for_data_seed``); 0 in a profile file."""
    chain_sum: ChainSumSettings = ChainSumSettings()
    gsm8k: Gsm8kSettings = Gsm8kSettings()
    policy: PolicySettings
    sampling: SamplingSettings = SamplingSettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    partitions: PartitionSettings = PartitionSettings()
    verify_workers: int = Field(1, ge=1)
    answer_check: AnswerCheck = "math_verify"
    """How a completion's answer is read (App. B): ``math_verify`` is Math-Verify's own
    extraction (the last ``\\boxed{}`` first, else a final stated answer), as in the paper;
    ``last_boxed`` accepts only the last ``\\boxed{}`` (a completion without one is wrong);
    ``rehearsal_coin`` (rehearsal profiles only) adds a seeded coin to Math-Verify's verdict
    so random-weight models give every split rows (``saturated_dag.tasks.verification``)."""
    judges: JudgeSettings = JudgeSettings()
    scoring: ScoringSettings = ScoringSettings()
    training: TrainingSettings = TrainingSettings()
    stages: StageSettings = StageSettings()
    automation: AutomationSettings = AutomationSettings()
    execution: ExecutionSettings = ExecutionSettings()
    tracking: TrackingSettings = TrackingSettings()
    testbed: TestbedSettings | None = None
    """The calibrated testbed's controls and dial (``docs/testbed.md``); None: not run."""

    @model_validator(mode="after")
    def _data_seed_is_one_of_the_draws(self) -> Profile:
        if self.data_seed >= self.data_seeds:
            raise ValueError(f"data_seed: {self.data_seed} is not one of the profile's "
                             f"data_seeds (0 to {self.data_seeds - 1})")
        return self

    def key_prefix_parts(self) -> list[str]:
        """The parts every asset key of the profile's graph starts with: ``[]`` or
        ``[key_prefix]`` (the Dagster layer's ``assets/_keys.py`` applies them)."""
        return [self.key_prefix] if self.key_prefix else []

    def for_data_seed(self, data_seed: int) -> Profile:
        """This profile for draw ``data_seed`` (``data_seeds``): what the pool-side assets of
        that draw's partition read. Data seed 0 is the profile itself."""
        if not 0 <= data_seed < self.data_seeds:
            raise ValueError(f"data seed {data_seed} is not one of the profile's data_seeds "
                             f"(0 to {self.data_seeds - 1})")
        if data_seed == self.data_seed:
            return self
        offset = data_seed - self.data_seed
        return self.model_copy(update={
            "data_seed": data_seed,
            "sampling": self.sampling.model_copy(update={"seed": self.sampling.seed + offset}),
            "scoring": self.scoring.model_copy(
                update={"random_seed": self.scoring.random_seed + offset})})

    @model_validator(mode="after")
    def _key_prefix_is_not_a_first_key_part(self) -> Profile:
        """A prefix spelled like a task or ``base_model`` would make one profile's keys look
        like another's."""
        if self.key_prefix is not None and self.key_prefix in {*get_args(TaskName),
                                                               "base_model"}:
            raise ValueError(f"key_prefix: {self.key_prefix!r} is already the first part of "
                             "an unprefixed asset key; choose another word (the profile's "
                             "name, say)")
        return self

    @model_validator(mode="after")
    def _testbed_on_the_embedded_model(self) -> Profile:
        """The oracle reads the embedded model's solution styles: another model has none."""
        if self.testbed is not None and "chain_sum" not in self.tasks:
            raise ValueError("testbed: needs the chain_sum task (the oracle reads chain-sum "
                             "solution styles); add chain_sum to tasks or remove testbed")
        return self

    @model_validator(mode="after")
    def _known_answer_scorers_are_scored(self) -> Profile:
        """A row ranked by a known-answer scorer needs that scorer's asset, on chain sum."""
        listed = set(self.scoring.known_answer_scorers)
        t = self.training
        named = {(sc, "training.scorers") for sc in t.scorers}
        named |= {(sc, f"training.method_scorers.{m}") for m, listed_scorers in
                  t.method_scorers.items() for sc in listed_scorers}
        if t.recipes is not None:
            named.add((t.recipes.scorer, "training.recipes.scorer"))
        for name in ("rank_weight", "rrhf_variants", "dpo_beta"):
            sweep = getattr(t.sweeps, name)
            if sweep is not None:
                named.add((sweep.scorer, f"training.sweeps.{name}.scorer"))
        for scorer, field in sorted(named):
            if scorer not in get_args(KnownAnswerScorer):
                _scorer_applies(scorer, field, self.tasks)
                continue
            if scorer not in listed:
                raise ValueError(f"{field}: {scorer!r} is a known-answer scorer; list it in "
                                 "scoring.known_answer_scorers so its scores are computed")
            if self.tasks != ["chain_sum"]:
                raise ValueError(f"{field}: {scorer!r} reads the embedded model's chain-sum "
                                 "solution styles and scores chain sum only; the profile's "
                                 f"tasks must be [chain_sum], not {self.tasks}")
        return self

    @model_validator(mode="after")
    def _coin_only_in_rehearsals(self) -> Profile:
        """A coin's "correct" measures nothing: only a rehearsal of the plumbing may use it."""
        if self.answer_check == "rehearsal_coin" and not self.name.startswith("rehearsal"):
            raise ValueError(f"answer_check: rehearsal_coin marks answers correct by a seeded "
                             f"coin and is for rehearsal profiles only (name starting with "
                             f"'rehearsal'), not {self.name!r}; use math_verify or last_boxed")
        return self

    @model_validator(mode="after")
    def _rrhf_batches_hold_questions(self) -> Profile:
        """σ-RRHF compares the completions of a question within one forward pass (App. B)."""
        t, n = self.training, self.sampling.n
        trains_rrhf = ("rrhf" in t.methods or t.sweeps.rank_weight is not None
                       or t.sweeps.rrhf_variants is not None)
        if trains_rrhf and t.per_device_batch_size < n:
            raise ValueError(f"training.per_device_batch_size ({t.per_device_batch_size}) must "
                             f"be at least sampling.n ({n}) when rrhf is trained: all "
                             "completions of a question go through the same forward pass")
        return self

    @model_validator(mode="after")
    def _judge_contexts_hold_two_completions(self) -> Profile:
        """A vLLM judge's context must hold two completions and a judgment before its prompt
        is even counted; the prompt itself is measured with the tokenizer at engine start."""
        budgets = [("policy.vllm.max_model_len", self.policy.backend,
                    self.policy.vllm.max_model_len, "the self-judge")]
        if self.judges.strong.kind == "llm":
            budgets.append(("judges.strong.vllm.max_model_len", self.judges.strong.backend,
                            self.judges.strong.vllm.max_model_len, "the strong judge"))
        floor = 2 * self.sampling.max_new_tokens + self.scoring.judge_max_new_tokens
        for field, backend, length, judge in budgets:
            if backend == "vllm" and isinstance(length, int) and length < floor:
                raise ValueError(
                    f"{field}: {length} tokens cannot hold {judge}'s prompt: two completions "
                    f"of sampling.max_new_tokens ({self.sampling.max_new_tokens}) and a "
                    f"judgment of scoring.judge_max_new_tokens "
                    f"({self.scoring.judge_max_new_tokens}) alone need {floor}, before the "
                    "prompt template and the question; set it to auto (computed from the "
                    "profile and the tokenizer when the engine starts) or a larger number")
        return self

    @model_validator(mode="after")
    def _trained_splits_are_scored(self) -> Profile:
        """Scorer-ranked training on a split needs that split's completions scored."""
        scored = {*self.scoring.correct_splits, *self.scoring.all_completion_splits}
        t = self.training
        ranked = set(t.methods) - {"sft"}
        needs = {(s, "training.splits") for s in t.splits if ranked}
        for name in ("rank_weight", "rrhf_variants", "dpo_beta"):
            sweep = getattr(t.sweeps, name)
            if sweep is not None:
                needs.add((sweep.split, f"training.sweeps.{name}.split"))
        for split, field in sorted(needs):
            if split not in scored:
                raise ValueError(f"{field}: split {split!r} is trained with scorer rankings "
                                 f"but is not scored; add it to scoring.correct_splits or "
                                 f"scoring.all_completion_splits (scored: {sorted(scored)})")
        return self
