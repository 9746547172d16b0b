"""Prompt text of the paper's task example (App. A.3), and how it reaches a model.

The policy sees the problem plus a format instruction; the judge sees only the problem
(App. D shows ``**Problem:** Compute the following step by step: <expr> =``).
"""

from __future__ import annotations

from typing import Any, Literal

FORMAT_INSTRUCTION = (
    "Show your reasoning and return the final answer in \\boxed{} tags, for example \\boxed{42}."
)

CHAIN_SUM_PROBLEM = "Compute the following step by step:\n{expression} ="

ChatTemplateMode = Literal["auto", "always", "never"]


def chain_sum_problem(expression: str) -> str:
    """The problem statement as the judge prompts show it."""
    return CHAIN_SUM_PROBLEM.format(expression=expression)


def policy_prompt(problem: str) -> str:
    """The user message the policy answers: the problem, then the boxed-answer instruction."""
    return f"{problem}\n{FORMAT_INSTRUCTION}"


def render_prompt(
    tokenizer: Any,
    user_text: str,
    mode: ChatTemplateMode = "auto",
    enable_thinking: bool | None = None,
) -> str:
    """Apply the tokenizer's chat template when it has one (or when forced), else plain text.

    ``auto`` uses the template when the tokenizer defines one, so instruct models get their
    own format and template-less base models see the raw prompt. ``enable_thinking`` reaches
    templates that read it (Qwen3 hybrid models: False closes an empty ``<think>`` block in the
    prompt, so sampling starts at the answer); None leaves the template's own default.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if mode == "never" or (mode == "auto" and not has_template):
        return user_text
    if not has_template:
        raise ValueError(
            "chat_template='always' but the tokenizer has no chat template; "
            "use 'auto' or 'never'"
        )
    switch = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True,
        **switch,
    )
