"""Rubric scorer: ranks the corpus styles, punishes wrong steps and hedging, is deterministic."""

from __future__ import annotations

import random

import pytest

from saturated_dag.scorers.rubric import boxed_answer, is_correct, rubric_breakdown, rubric_score
from saturated_dag.tasks.solution_styles import (
    STYLES,
    Expression,
    detect_style,
    render_solution,
    sample_expression,
)


@pytest.mark.parametrize("expr_text", ["381 - 706 - 602 + 383", "3 + 4", "12 - 50 + 7 - 99 + 1"])
def test_styles_rank_in_order(expr_text: str) -> None:
    expr = Expression.parse(expr_text)
    scores = [rubric_score(render_solution(expr, s), expr) for s in STYLES]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert scores[0] == 1.0


def test_wrong_intermediate_step_lowers_score() -> None:
    expr = Expression.parse("381 - 706 - 602 + 383")
    good = render_solution(expr, "steps")
    slip = good.replace("381 - 706 = -325", "381 - 706 = -335")
    assert is_correct(slip, expr.answer)  # final answer unchanged, one false equation
    assert rubric_score(slip, expr) < rubric_score(good, expr)
    assert rubric_breakdown(slip, expr).steps < 1.0


def test_wrong_answer_scores_below_any_correct_style() -> None:
    expr = Expression.parse("45 + 17 - 3")
    wrong = render_solution(expr, "steps", [62, 60])
    assert not is_correct(wrong, expr.answer)
    assert rubric_score(wrong, expr) < min(
        rubric_score(render_solution(expr, s), expr) for s in STYLES
    )


def test_hedging_and_format() -> None:
    expr = "2 + 2"
    assert rubric_breakdown("I think it is maybe \\boxed{4}", expr).no_hedge == 0.0
    assert rubric_breakdown("\\boxed{4} or \\boxed{5}", expr).format < 1.0
    assert rubric_breakdown("The answer is 4", expr).total < rubric_score("\\boxed{4}", expr)
    assert boxed_answer("a \\boxed{1} b \\boxed{ -7 }") == "-7"


def test_detect_style_roundtrip_and_determinism() -> None:
    rng = random.Random(0)
    for _ in range(50):
        expr = sample_expression(rng, rng.randint(2, 5), rng.randint(1, 3))
        for style in STYLES:
            text = render_solution(expr, style)
            assert detect_style(text) == style
            assert rubric_score(text, expr.text) == rubric_score(text, expr)
    assert detect_style("no idea") == "other"


def test_expression_parse() -> None:
    expr = Expression.parse("381 - 706 - 602 + 383 =")
    assert expr.terms == (381, 706, 602, 383) and expr.ops == ("-", "-", "+")
    assert expr.partials() == [-325, -927, -544] and expr.text == "381 - 706 - 602 + 383"
