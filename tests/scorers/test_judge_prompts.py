"""The paper's judge prompts: verbatim text, LaTeX unescaping, filling and the judgment regex."""

from __future__ import annotations

import pytest

from saturated_dag.scorers import judge_prompts as jp


def test_chain_sum_few_shot_is_unescaped_and_dedented() -> None:
    text = jp.CHAIN_SUM_FEW_SHOT
    assert text.startswith("# Mathematical Solution Evaluation\n\nThere are math problems")
    assert "\\\\" not in text  # \\[ and \\boxed in the .tex are \[ and \boxed for the model
    assert "\\[\n  593615 + 204846 = 798461\n\\]" in text
    assert "The final answer is: \\boxed{-476059}" in text
    assert "Solution 0 is more direct --\nit computes" in text  # listing: -- stays literal
    assert "**Judgment: [IDX]** *(Where `IDX` is the index $0 - {max_idx}$ of the best" in text
    assert text.endswith("**Solutions:** {solutions}\n\n### EVALUATION")


def test_gsm8k_few_shot_fills_like_str_format() -> None:
    msgs = jp.judge_messages("gsm8k", "How many?", ["a", "b", "c"], instruct=False)
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    text = msgs[0]["content"]
    assert "\\frac{144 \\text{ cans}}{12 \\text{ cans/set}}" in text
    assert "$\\boxed{12}$" in text and "{{" not in text and "\\\\" not in text
    assert "**Solutions (indices 0--2):**\n0) a\n\n1) b\n\n2) c\n\n### EVALUATION" in text


def test_chain_sum_messages() -> None:
    problem = "Compute the following step by step:\n3 + 4 ="
    base = jp.judge_messages("chain_sum", problem, ["x", "y"], instruct=False)[0]["content"]
    assert "$0 - 1$" in base and "{max_idx}" not in base and "{problem}" not in base
    assert base.endswith(f"**Problem:** {problem}\n\n**Solutions:** 0) x\n\n1) y\n\n### EVALUATION")
    system, user = jp.judge_messages("chain_sum", problem, ["x", "y"], instruct=True)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith("You are an expert evaluator of mathematical solutions.")
    assert (
        user["content"] == f"**Problem:** {problem}\n\n**Solutions (indices 0-1):**\n0) x\n\n1) y"
    )
    assert jp.judge_messages("gsm8k", "p", ["x", "y"], True)[0]["content"] == jp.GSM8K_SYSTEM


def test_format_solutions() -> None:
    assert jp.format_solutions(["first\n", "second"]) == "0) first\n\n1) second"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("analysis\n\n**Judgment: [1]**", 1),
        ("Judgment: [0]", 0),
        ("**Judgment: [12]**  \n", 12),
        ("Judgment: [0] and more", None),
        ("Judgment: 0", None),
        ("", None),
    ],
)
def test_parse_judgment(text: str, expected: int | None) -> None:
    assert jp.parse_judgment(text) == expected


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        jp.judge_messages("chain_sum", "p", ["only one"], True)
    with pytest.raises(ValueError):
        jp.judge_messages("other", "p", ["a", "b"], True)
