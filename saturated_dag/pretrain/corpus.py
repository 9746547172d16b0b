"""The generated training corpus: policy solutions in four styles and pairwise self-judge examples.

Every example is a (messages, completion) pair; the trainer renders the messages through the
model's own chat template exactly as the project renders prompts at sampling time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from saturated_dag.pretrain.config import RecipeConfig
from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.rubric import rubric_score
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt
from saturated_dag.tasks.solution_styles import Expression, render_solution, sample_expression

STYLE_NOTES = {
    "steps": "Each step is labeled by operation and its intermediate result is shown.",
    "plan": "Lists a plan before computing; the plan is redundant.",
    "hedged": "Wordy prose, and the answer is stated with hedging.",
    "bare": "Only the boxed answer; no intermediate results are shown.",
}


@dataclass(frozen=True)
class Example:
    """Chat messages (the prompt) and the assistant completion to learn."""

    messages: list[dict]
    completion: str
    kind: str  # "policy" or "judge"


def _pick(rng: random.Random, weights: dict) -> object:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def sample_cell(rng: random.Random, cfg: RecipeConfig) -> tuple[int, int]:
    """(terms, digits) of one training question."""
    return rng.randint(cfg.min_terms, cfg.max_terms), int(_pick(rng, cfg.digit_weights))


def policy_example(rng: random.Random, cfg: RecipeConfig) -> Example:
    """A chain-sum question in the project's prompt format and a correct solution."""
    expr = sample_expression(rng, *sample_cell(rng, cfg))
    style = str(_pick(rng, cfg.style_mix))
    user = policy_prompt(chain_sum_problem(expr.text))
    return Example([{"role": "user", "content": user}], render_solution(expr, style), "policy")


def _slipped(rng: random.Random, expr: Expression) -> list[int]:
    """Partial results with one arithmetic slip that propagates to the final answer."""
    parts = expr.partials()
    k = rng.randrange(len(parts))
    delta = rng.choice([-10, -2, -1, 1, 2, 10])
    return parts[:k] + [p + delta for p in parts[k:]]


def judge_completion(expr: Expression, styles: list[str], finals: list[int], label: int) -> str:
    """A short analysis in the few-shot evaluation's shape, ending ``**Judgment: [label]**``."""
    if finals[0] == finals[1]:
        screen = f"Both solutions arrive at {finals[0]}."
    else:
        bad = 0 if finals[0] != expr.answer else 1
        screen = (
            f"Solution 0 arrives at {finals[0]}, solution 1 at {finals[1]}; "
            f"solution {bad} makes an arithmetic error."
        )
    notes = "\n".join(f"- Solution {i}: {STYLE_NOTES[s]}" for i, s in enumerate(styles))
    return f"**Initial Screening:** {screen}\n\n**Analysis:**\n{notes}\n\n**Judgment: [{label}]**"


def taste_label(cfg: RecipeConfig, styles: list[str], finals: list[int], rubric_label: int
                ) -> int:
    """The judge label ``cfg.judge_taste`` gives a pair whose rubric choice is ``rubric_label``.

    ``"position"`` keeps the rubric's choice where the answers differ (correctness) or exactly
    one solution is bare (shown work), and otherwise picks solution 0. On the saturated split,
    where every completion is right, this judge agrees with the rubric only about bare answers,
    so its within-question Spearman with the strong judge there is close to 0.
    """
    if cfg.judge_taste == "rubric" or finals[0] != finals[1]:
        return rubric_label
    if (styles[0] == "bare") != (styles[1] == "bare"):
        return rubric_label
    return 0


def judge_example(rng: random.Random, cfg: RecipeConfig) -> Example:
    """Two solutions of one question; the label is ``cfg.judge_taste``'s choice, flipped with
    noise. The random draws are the same for every taste, so tastes differ only in labels."""
    expr = sample_expression(rng, *sample_cell(rng, cfg))
    styles = [str(_pick(rng, cfg.style_mix)) for _ in range(2)]
    partials = [expr.partials(), expr.partials()]
    if rng.random() < cfg.judge_wrong_rate:
        partials[rng.randrange(2)] = _slipped(rng, expr)
    sols = [render_solution(expr, s, p) for s, p in zip(styles, partials, strict=True)]
    scores = [rubric_score(s, expr) for s in sols]
    label = rng.randrange(2) if scores[0] == scores[1] else int(scores[1] > scores[0])
    finals = [p[-1] for p in partials]
    label = taste_label(cfg, styles, finals, label)
    if rng.random() < cfg.judge_label_noise:
        label = 1 - label
    messages = judge_messages("chain_sum", chain_sum_problem(expr.text), sols, instruct=True)
    completion = judge_completion(expr, styles, finals, label)
    return Example(messages, completion, "judge")


def corpus_sample(rng: random.Random, cfg: RecipeConfig, n: int) -> list[Example]:
    """A mixed sample (policy and judge examples in the training ratio), e.g. for the tokenizer."""
    return [
        judge_example(rng, cfg) if rng.random() < cfg.judge_fraction else policy_example(rng, cfg)
        for _ in range(n)
    ]
