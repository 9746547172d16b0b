"""Answer checking (App. B): a completion's answer against the gold, in one of two modes.

``math_verify`` (the paper's rule, the default): Math-Verify's own extraction on the whole
completion with its default configs (``LatexExtractionConfig`` + ``ExprExtractionConfig``). It
reads, by priority, a "final answer is ..." statement, then the ``\\boxed{}`` answer, then an
"answer: ..." statement, then the rightmost plain number or LaTeX, so ``The answer is 12.``
counts. Several different boxed answers become a set that never verifies.

``last_boxed`` (an option, not the paper's): only the content of the last ``\\boxed{}``
counts; a completion without one is wrong.

``rehearsal_coin`` (rehearsal profiles only; config refuses it elsewhere): Math-Verify's
verdict, else a seeded coin with a pass rate per question from its gold (``coin_rate``), so
the rehearsal's random-weight models leave every split and table of the GPU path rows to run
on. Its "correct" is a plumbing device, not a measurement (``REHEARSAL_CAVEAT``).

Math-Verify's defaults use ``signal.alarm`` and raise outside the main thread, so every call
here disables its timeouts and bounds the input size instead. In both modes, digit groups
separated by spaces inside a box (``\\boxed{1 234}``, which Math-Verify parses as 235) and an
empty last box (a completion that boxes nothing has given no answer) are handled first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing import get_context
from typing import Literal, get_args

from math_verify import parse, verify

# Math-Verify warns on every call that timeouts are off; that is deliberate here.
logging.getLogger("math_verify").setLevel(logging.ERROR)

AnswerCheck = Literal["math_verify", "last_boxed", "rehearsal_coin"]
ANSWER_CHECKS: tuple[str, ...] = get_args(AnswerCheck)
READING_CHECKS: tuple[str, ...] = ("math_verify", "last_boxed")
"""The checks that read an answer (``rehearsal_coin`` adds a coin to the first)."""
REHEARSAL_CAVEAT = ("answer_check rehearsal_coin: random-weight models, correctness marked by "
                    "a seeded coin; these numbers test the plumbing and measure nothing")

MAX_ANSWER_CHARS = 200
"""Longer extracted answers are wrong without a symbolic comparison (no timeout protects it)."""
MAX_COMPLETION_CHARS = 20_000
"""Math-Verify reads only this tail of a completion (about 5,000 tokens; answers come last)."""
_SPACED_THOUSANDS = re.compile(r"^-?\d{1,3}(?: \d{3})+$")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOXED_SPACED_THOUSANDS = re.compile(r"(\\(?:boxed|fbox)\s*\{\s*\$?\s*)(-?\d{1,3}(?: \d{3})+)"
                                     r"(?=\s*\$?\s*\})")


@dataclass(frozen=True)
class Verdict:
    """What was extracted from a completion and whether it matches the gold."""

    answer: str | None  # the extracted answer text ("" for an empty box), None when none
    correct: bool


def extract_last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None when absent/unclosed."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
            i += 1
    return None


def _normalise(answer: str) -> str:
    answer = answer.strip().strip("$").strip()
    if _SPACED_THOUSANDS.match(answer):
        answer = answer.replace(" ", "")
    return answer


def _parse_math(expression: str) -> list:
    return parse(f"${expression}$", parsing_timeout=None)


def _join_boxed_thousands(text: str) -> str:
    """``\\boxed{1 234}`` -> ``\\boxed{1234}``: Math-Verify reads the space as a product."""
    return _BOXED_SPACED_THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(" ", ""), text)


def _gold(gold: str) -> list:
    parsed = _parse_math(_normalise(gold))
    if not parsed:
        raise ValueError(f"gold answer {gold!r} cannot be parsed by Math-Verify")
    return parsed


def _last_boxed_verdict(completion: str, gold: str) -> Verdict:
    answer = extract_last_boxed(completion)
    if answer is None:
        return Verdict(None, False)
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return Verdict(answer, False)
    gold_parsed = _gold(gold)
    predicted = _parse_math(_normalise(answer))
    if not predicted:
        return Verdict(answer, False)
    return Verdict(answer, bool(verify(gold_parsed, predicted, timeout_seconds=None)))


def _extracted_text(predicted: list) -> str:
    """The answer as written: Math-Verify appends the matched text after the parsed value."""
    texts = [p for p in predicted if isinstance(p, str)]
    return texts[-1] if texts else str(predicted[0])


def _math_verify_verdict(completion: str, gold: str) -> Verdict:
    gold_parsed = _gold(gold)
    text = completion[-MAX_COMPLETION_CHARS:]
    if extract_last_boxed(text) == "":
        return Verdict("", False)
    predicted = parse(_join_boxed_thousands(text), parsing_timeout=None)
    if not predicted:
        return Verdict(None, False)
    answer = _extracted_text(predicted)
    if len(answer) > MAX_ANSWER_CHARS:
        return Verdict(answer, False)
    return Verdict(answer, bool(verify(gold_parsed, predicted, timeout_seconds=None)))


def _check_mode(mode: str) -> None:
    if mode not in ANSWER_CHECKS:
        raise ValueError(f"unknown answer check {mode!r}; expected one of {list(ANSWER_CHECKS)}")


def _unit(*parts: str) -> float:
    """A stable draw in [0, 1) from text (the same on every machine and process)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def coin_rate(gold: str) -> float:
    """The rehearsal coin's pass rate of a question, from its gold: about 40% of questions
    1 (saturated), 10% 1/2 (the middle), 35% 1/8 (mostly hard with a correct completion, as
    correctness pairs and hard-split training need), 15% 0."""
    u = _unit("rate", gold)
    return 1.0 if u < 0.4 else 0.5 if u < 0.5 else 0.125 if u < 0.85 else 0.0


def verify_answer(completion: str, gold: str, mode: AnswerCheck = "math_verify") -> Verdict:
    """Check one completion against ``gold`` under ``mode`` (see the module docstring)."""
    _check_mode(mode)
    if mode == "last_boxed":
        return _last_boxed_verdict(completion, gold)
    verdict = _math_verify_verdict(completion, gold)
    if mode == "rehearsal_coin" and not verdict.correct:
        return Verdict(verdict.answer, _unit("completion", gold, completion) < coin_rate(gold))
    return verdict


def unmatched_answer_checks(gold: str, answer: str) -> list[str]:
    """The answer checks that would mark ``\\boxed{answer}`` wrong against ``gold``.

    For dataset loaders: a gold that a correct, boxed answer cannot match (``1e3`` against
    ``\\boxed{1000}``) would silently score every right completion as wrong, so a loader asks
    this with the gold's plain form and refuses the row. A gold Math-Verify cannot parse at all
    fails every check. Empty when every mode in ``ANSWER_CHECKS`` accepts the answer.
    """
    completion = f"\\boxed{{{answer}}}"
    failed: list[str] = []
    for mode in READING_CHECKS:
        try:
            correct = verify_answer(completion, gold, mode).correct
        except ValueError:  # the gold itself cannot be parsed
            correct = False
        if not correct:
            failed.append(mode)
    return failed


def _verify_chunk(pairs: list[tuple[str, str]], mode: AnswerCheck) -> list[Verdict]:
    return [verify_answer(c, g, mode) for c, g in pairs]


def verify_many(
    completions: Sequence[str],
    golds: Sequence[str],
    workers: int = 1,
    min_parallel: int = 2000,
    mode: AnswerCheck = "math_verify",
) -> list[Verdict]:
    """Verify many completions; over ``workers`` worker processes when large (about 3-5 ms
    each)."""
    _check_mode(mode)
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    pairs = list(zip(completions, golds, strict=True))
    if workers <= 1 or len(pairs) < min_parallel:
        return _verify_chunk(pairs, mode)
    size = max(1, len(pairs) // (workers * 4))
    chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    # spawn: workers must not inherit torch's threads from a forked parent; bound to this
    # process (saturated_dag.infra.lifeline), so a killed run leaves no checker running.
    from saturated_dag.infra.lifeline import bind_worker

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                             initializer=bind_worker, initargs=(os.getpid(),)) as checkers:
        return [v for chunk in checkers.map(partial(_verify_chunk, mode=mode), chunks)
                for v in chunk]
