"""The whole profile (``Profile``): its sections, the checks that span several of them, and
the one list of the scorers it names (``Profile.scorer_names``) and of the sweeps a profile
may configure (``SWEEPS``)."""

from __future__ import annotations

from typing import get_args

from pydantic import Field, model_validator

from saturated_dag.config.base import Strict
from saturated_dag.config.models import JudgeSettings, PolicySettings
from saturated_dag.config.runtime import (
    AutomationSettings,
    ExecutionSettings,
    StageSettings,
    TrackingSettings,
)
from saturated_dag.config.sampling import EvaluationSettings, PartitionSettings, SamplingSettings
from saturated_dag.config.scoring import KnownAnswerScorer, ScoringSettings, scorer_applies
from saturated_dag.config.sweeps import Sweep, SweepSettings
from saturated_dag.config.tasks import ChainSumSettings, Gsm8kSettings, TaskName
from saturated_dag.config.testbed import TestbedSettings
from saturated_dag.config.training import TrainingSettings
from saturated_dag.tasks.verification import AnswerCheck

SWEEPS: tuple[str, ...] = tuple(SweepSettings.model_fields)
"""The sweeps a profile may configure (``training.sweeps.<name>``), in table order: the fields
of ``SweepSettings``, so a sweep added there is in every loop over them."""


def configured_sweeps(sweeps: SweepSettings) -> dict[str, Sweep]:
    """The sweeps ``sweeps`` configures (those not null), by name, in ``SWEEPS`` order."""
    found = {name: getattr(sweeps, name) for name in SWEEPS}
    return {name: sweep for name, sweep in found.items() if sweep is not None}


class Profile(Strict):
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

    def scorer_fields(self) -> list[tuple[str, str]]:
        """Each scorer a training row ranks by, with the field that names it, in order:
        ``training.scorers``, each ``training.method_scorers.<method>``, then each configured
        sweep's ``scorer`` (``training.sweeps.<name>.scorer``); a name may repeat."""
        t = self.training
        return [*((sc, "training.scorers") for sc in t.scorers),
                *((sc, f"training.method_scorers.{m}") for m, listed in
                  t.method_scorers.items() for sc in listed),
                *((sweep.scorer, f"training.sweeps.{name}.scorer")
                  for name, sweep in configured_sweeps(t.sweeps).items())]

    def scorer_names(self) -> list[str]:
        """Every scorer the profile names, each once, in order: ``scoring.known_answer_scorers``,
        then the training rows' (``scorer_fields``); ``training.recipes.scorer`` picks one of
        the rows' cells and adds none. The graph scores each that applies to a task beside the
        ones scored by default (``assets/quality_scores.py``)."""
        return list(dict.fromkeys([*self.scoring.known_answer_scorers,
                                   *(sc for sc, _ in self.scorer_fields())]))

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
        named = set(self.scorer_fields())
        if self.training.recipes is not None:
            named.add((self.training.recipes.scorer, "training.recipes.scorer"))
        for scorer, field in sorted(named):
            if scorer not in get_args(KnownAnswerScorer):
                scorer_applies(scorer, field, self.tasks)
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
        needs |= {(sweep.split, f"training.sweeps.{name}.split")
                  for name, sweep in configured_sweeps(t.sweeps).items()}
        for split, field in sorted(needs):
            if split not in scored:
                raise ValueError(f"{field}: split {split!r} is trained with scorer rankings "
                                 f"but is not scored; add it to scoring.correct_splits or "
                                 f"scoring.all_completion_splits (scored: {sorted(scored)})")
        return self
