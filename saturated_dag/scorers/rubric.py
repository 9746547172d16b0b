"""Deterministic rubric score of a chain-sum completion (the paper's "rubric as quality signal").

Why a rubric: it is the demo's strong judge and the ground truth that self-judge and entropy
rankings are compared against (Spearman). It rewards what App. D's judge prompt asks for:
a correct boxed answer, every intermediate result shown and correct, no hedging, no padding.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from saturated_dag.tasks.solution_styles import HEDGE_WORDS, Expression

WEIGHTS = {"final": 0.4, "steps": 0.3, "format": 0.1, "no_hedge": 0.1, "concise": 0.1}
"""Component weights; they sum to 1, so a perfect completion scores 1.0."""

_BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
_EQ_RE = re.compile(r"(-?\d+)\s*([+-])\s*(\d+)\s*=\s*(-?\d+)")
_WORD_RE = re.compile(r"[A-Za-z']+")


@dataclass(frozen=True)
class RubricBreakdown:
    """Each component in [0, 1] and the weighted total."""

    final: float
    steps: float
    format: float
    no_hedge: float
    concise: float
    total: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def boxed_answer(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, stripped, or ``None``."""
    found = _BOXED_RE.findall(text)
    return found[-1].strip() if found else None


def is_correct(text: str, gold: int) -> bool:
    """The last boxed value is exactly the integer ``gold``."""
    ans = boxed_answer(text)
    return ans is not None and re.fullmatch(r"-?\d+", ans) is not None and int(ans) == gold


def _steps_score(text: str, expr: Expression) -> float:
    """Share of expected left-to-right steps shown correctly, minus one step per false equation."""
    shown = {(int(a), op, int(b), int(r)) for a, op, b, r in _EQ_RE.findall(text)}
    wrong = sum(1 for a, op, b, r in shown if (a + b if op == "+" else a - b) != r)
    expected, prev = [], expr.terms[0]
    for op, t, res in zip(expr.ops, expr.terms[1:], expr.partials(), strict=True):
        expected.append((prev, op, t, res))
        prev = res
    matched = sum(1 for e in expected if e in shown)
    return max(0.0, (matched - wrong) / len(expected))


def _format_score(text: str) -> float:
    """One boxed answer, and it closes the completion."""
    count = len(_BOXED_RE.findall(text))
    if count == 0:
        return 0.0
    ends = re.search(r"\\boxed\{[^{}]*\}\.?\s*$", text) is not None
    return (1.0 if count == 1 else 0.5) * (1.0 if ends else 0.5)


def _concise_score(text: str, n_steps: int) -> float:
    """Words beyond a budget of a header, one label per step and a closing phrase cost score."""
    words = len(_WORD_RE.findall(_BOXED_RE.sub("", text)))
    budget = 12 + 2 * n_steps
    return 1.0 / (1.0 + max(0, words - budget) / budget)


def rubric_breakdown(completion: str, expression: str | Expression) -> RubricBreakdown:
    """Score ``completion`` against ``expression`` (text like ``"3 + 4 - 2"`` or parsed)."""
    expr = Expression.parse(expression) if isinstance(expression, str) else expression
    parts = {
        "final": 1.0 if is_correct(completion, expr.answer) else 0.0,
        "steps": _steps_score(completion, expr),
        "format": _format_score(completion),
        "no_hedge": 0.0 if any(w.lower() in completion.lower() for w in HEDGE_WORDS) else 1.0,
        "concise": _concise_score(completion, len(expr.ops)),
    }
    total = sum(WEIGHTS[k] * v for k, v in parts.items())
    return RubricBreakdown(**parts, total=round(total, 6))


def rubric_score(completion: str, expression: str | Expression) -> float:
    """The weighted rubric total in [0, 1]; higher is better."""
    return rubric_breakdown(completion, expression).total
