"""The built-in scorers' registrations: the paper's four (Sec. 3.2) and the embedded world's
known-answer scorers (``docs/testbed.md``), and the lookups that need them registered. A new
scorer registers the same way (``docs/extending.md``)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from saturated_dag.scorers import oracle as known
from saturated_dag.scorers.random_scores import random_scores
from saturated_dag.scorers.registry import (
    BUILTIN_NAMES,
    SCORERS,
    Scored,
    ScorerInputs,
    ScorerSpec,
    check_name,
    register,
)


def _random(inputs: ScorerInputs) -> Scored:
    return Scored(random_scores(inputs.completions, inputs.seed), {"seed": inputs.seed})


def _known_answer(name: str, inputs: ScorerInputs) -> Scored:
    accuracy = known.style_accuracy(inputs.pool)
    (scores, facts), = known.known_answer_scores(inputs.completions, accuracy, inputs.seed,
                                                 [name]).values()
    return Scored(scores, {"style accuracy on the pool": accuracy,
                           **{k: float(v) for k, v in facts.items()}, "seed": inputs.seed})


def _known_answer_text(name: str) -> str:
    if name == "oracle":
        return ("the oracle: correctness first, then the solution style measured most "
                "accurate on the pool")
    if name == known.SHUFFLED:
        return "the oracle's scores shuffled within each question (the negative control)"
    return (f"the oracle mixed with noise to a within-question ρ of {known.DIAL[name]:g} "
            "with it")


register(ScorerSpec(
    "entropy", "r = 1/max(mean token entropy, eps) under the policy at T=1 (from the "
    "generation pass, else teacher-forced).", scored_by_default=True, gpu=True))
register(ScorerSpec(
    "self_judge", "win rates of a round-robin tournament judged greedily by the policy "
    "itself (App. D prompts).", scored_by_default=True, gpu=True))
register(ScorerSpec(
    "strong_judge", "win rates of a round-robin tournament judged by the strong judge (an "
    "LLM, or the chain-sum rubric).", scored_by_default=True, gpu=True))
register(ScorerSpec(
    "random", "uniform random scores, seeded per question (the baseline).", compute=_random,
    scored_by_default=True))
for _name in known.ORACLE_SCORERS:
    register(ScorerSpec(_name, _known_answer_text(_name) + " (docs/testbed.md).",
                        compute=partial(_known_answer, _name),
                        listed_in="scoring.known_answer_scorers", tasks=("chain_sum",)))


def registered() -> tuple[ScorerSpec, ...]:
    """Every registered scorer: the built-ins in their order (the agreement table's columns),
    then the others in registration order."""
    return (*(SCORERS[name] for name in BUILTIN_NAMES),
            *(spec for spec in SCORERS.values() if spec.name not in BUILTIN_NAMES))


def scorer(name: str) -> ScorerSpec:
    """The registered scorer ``name``; an unknown name is an error naming the known ones."""
    return SCORERS[check_name(name)]


def task_scorers(names: Iterable[str], task: str) -> list[ScorerSpec]:
    """The registered scorers ``task`` scores: every one scored by default, then each of
    ``names`` (a profile's ``Profile.scorer_names``: ``scoring.known_answer_scorers``, then the
    training rows' and sweeps' scorers) that applies to the task, in that order."""
    specs = [spec for spec in registered() if spec.scored_by_default]
    for name in names:
        spec = scorer(name)
        if spec not in specs and spec.applies_to(task):
            specs.append(spec)
    return specs


if not set(BUILTIN_NAMES) <= set(SCORERS):
    raise RuntimeError(f"registry.BUILTIN_NAMES names scorers builtin.py does not register: "
                       f"{sorted(set(BUILTIN_NAMES) - set(SCORERS))}")
