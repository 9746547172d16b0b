"""Chain-sum expressions and the four solution styles the corpus teaches.

Each style has a fixed, recognisable surface form (so ``detect_style`` can tell them apart in
sampled completions) and they differ in quality the way the paper's judge prompt (App. D) and
task example (App. A.3) rank them: direct labelled steps beat plan-then-execute, hedged prose
is verbose and uncertain, and a bare boxed answer shows no reasoning at all.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

STYLES: tuple[str, ...] = ("steps", "plan", "hedged", "bare")
"""Style names, best first (the rubric ranks them in this order)."""

HEDGE_WORDS: tuple[str, ...] = ("probably", "I think", "maybe", "perhaps", "I guess")

_TERM_RE = re.compile(r"\s*([+-])\s*")


@dataclass(frozen=True)
class Expression:
    """A chain sum ``t0 op1 t1 op2 t2 ...`` with non-negative operands (reasoning-gym style)."""

    terms: tuple[int, ...]
    ops: tuple[str, ...]

    @property
    def text(self) -> str:
        parts = [str(self.terms[0])]
        for op, t in zip(self.ops, self.terms[1:], strict=True):
            parts += [op, str(t)]
        return " ".join(parts)

    def partials(self) -> list[int]:
        """Left-to-right intermediate results; the last one is the answer."""
        acc, out = self.terms[0], []
        for op, t in zip(self.ops, self.terms[1:], strict=True):
            acc = acc + t if op == "+" else acc - t
            out.append(acc)
        return out

    @property
    def answer(self) -> int:
        return self.partials()[-1]

    @classmethod
    def parse(cls, text: str) -> Expression:
        """Parse ``"381 - 706 - 602 + 383"`` (a trailing ``=`` is ignored)."""
        body = text.strip().rstrip("=").strip()
        pieces = _TERM_RE.split(body)
        terms = tuple(int(p) for p in pieces[0::2])
        ops = tuple(pieces[1::2])
        if len(terms) < 2 or len(ops) != len(terms) - 1:
            raise ValueError(f"not a chain sum: {text!r}")
        return cls(terms, ops)


def sample_expression(rng: random.Random, num_terms: int, num_digits: int) -> Expression:
    """Operands as reasoning-gym draws them: 0-9 for one digit, else exactly ``num_digits``."""
    lo = 0 if num_digits == 1 else 10 ** (num_digits - 1)
    hi = 10**num_digits - 1
    terms = tuple(rng.randint(lo, hi) for _ in range(num_terms))
    ops = tuple(rng.choice("+-") for _ in range(num_terms - 1))
    return Expression(terms, ops)


def _steps_lines(expr: Expression, partials: list[int]) -> list[tuple[str, int, str, int, int]]:
    prev, rows = expr.terms[0], []
    for op, t, res in zip(expr.ops, expr.terms[1:], partials, strict=True):
        rows.append(("Addition" if op == "+" else "Subtraction", prev, op, t, res))
        prev = res
    return rows


def render_solution(expr: Expression, style: str, partials: list[int] | None = None) -> str:
    """A solution of ``expr`` in ``style``; ``partials`` overrides results (to inject slips)."""
    parts = expr.partials() if partials is None else partials
    rows = _steps_lines(expr, parts)
    final = parts[-1]
    if style == "bare":
        return f"\\boxed{{{final}}}"
    if style == "steps":
        body = "\n".join(
            f"{i}. **{label}:** {a} {op} {b} = {r}"
            for i, (label, a, op, b, r) in enumerate(rows, 1)
        )
        closing = f"The final answer is: \\boxed{{{final}}}"
        return f"Let's solve the problem step by step:\n\n{body}\n\n{closing}"
    if style == "plan":
        plan = []
        for i, (_, _, op, b, _) in enumerate(rows, 1):
            target = expr.terms[0] if i == 1 else ("the result" if i == 2 else "the new result")
            verb = f"Add {b} to {target}" if op == "+" else f"Subtract {b} from {target}"
            plan.append(f"{i}. {verb}")
        calc = [f"{i}. {a} {op} {b} = {r}" for i, (_, a, op, b, r) in enumerate(rows, 1)]
        return (
            "Let's solve this step by step:\n\n"
            + "\n".join(plan)
            + "\n\nNow, let's compute each step:\n\n"
            + "\n".join(calc)
            + f"\n\nSo, the final answer is \\boxed{{{final}}}."
        )
    if style == "hedged":
        lines = ["To solve this, I think we go from left to right."]
        for i, (_, a, op, b, r) in enumerate(rows):
            lead = (
                "First, the first two numbers:"
                if i == 0
                else "Finally, the last number:"
                if i == len(rows) - 1
                else "Then the next number:"
            )
            lines.append(f"{lead} {a} {op} {b} = {r}")
        lines.append(f"So, the result probably is \\boxed{{{final}}}.")
        return "\n\n".join(lines)
    raise ValueError(f"unknown style {style!r}; expected one of {STYLES}")


def detect_style(completion: str) -> str:
    """Which of ``STYLES`` a completion uses, by its surface markers; ``"other"`` if none."""
    text = completion.strip()
    if "Now, let's compute each step:" in text:
        return "plan"
    if re.search(r"\*\*(Addition|Subtraction):\*\*", text):
        return "steps"
    if any(w in text for w in HEDGE_WORDS):
        return "hedged"
    if re.fullmatch(r"\\boxed\{-?\d+\}\.?", text):
        return "bare"
    return "other"
