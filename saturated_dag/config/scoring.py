"""The quality scorers: which names a profile may rank by (``Scorer``), and which completions
get scores with which knobs (``scoring``, Sec. 3.2, App. B.3)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from saturated_dag.config.base import Strict

ScoredSplit = Literal["saturated", "hard", "middle", "strict_saturated", "strict_excluded"]


KnownAnswerScorer = Literal["oracle", "oracle_rho75", "oracle_rho50", "oracle_rho25",
                            "oracle_rho0", "oracle_shuffled"]
"""The embedded world's known-answer scorers (``scorers/oracle.py``): the oracle, its
reliability dial (ρ 0.75 ... 0 with the oracle) and its within-question shuffle."""


def _registered_scorer(name: str) -> str:
    """A scorer name must be in the scorer registry (``saturated_dag.scorers.registry``)."""
    from saturated_dag.scorers.registry import check_name

    return check_name(name)


def scorer_applies(name: str, field: str, tasks: list[str]) -> None:
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


class ScoringSettings(Strict):
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
