"""Answer checking with Math-Verify: the last ``\\boxed{}`` of a completion against the gold.

Math-Verify's defaults use ``signal.alarm`` and raise outside the main thread, so every call
here disables its timeouts (safe in worker threads and processes) and bounds the input size
instead. Math-Verify alone mis-reads two common forms, handled before parsing: several boxed
answers (it builds a set that never verifies, the paper's rule is the *last* box) and digit
groups separated by spaces (``1 234`` parses as 235).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from math_verify import parse, verify

# Math-Verify warns on every call that timeouts are off; that is deliberate here.
logging.getLogger("math_verify").setLevel(logging.ERROR)

MAX_ANSWER_CHARS = 200
_SPACED_THOUSANDS = re.compile(r"^-?\d{1,3}(?: \d{3})+$")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass(frozen=True)
class Verdict:
    """What was extracted from a completion and whether it matches the gold."""

    answer: str | None  # content of the last \boxed{}, None when there is none
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


def verify_answer(completion: str, gold: str) -> Verdict:
    """Check one completion: its last boxed answer must be equivalent to ``gold``."""
    answer = extract_last_boxed(completion)
    if answer is None:
        return Verdict(None, False)
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return Verdict(answer, False)
    gold_parsed = _parse_math(_normalise(gold))
    if not gold_parsed:
        raise ValueError(f"gold answer {gold!r} cannot be parsed by Math-Verify")
    predicted = _parse_math(_normalise(answer))
    if not predicted:
        return Verdict(answer, False)
    return Verdict(answer, bool(verify(gold_parsed, predicted, timeout_seconds=None)))


def _verify_chunk(pairs: list[tuple[str, str]]) -> list[Verdict]:
    return [verify_answer(c, g) for c, g in pairs]


def verify_many(
    completions: Sequence[str],
    golds: Sequence[str],
    workers: int = 1,
    min_parallel: int = 2000,
) -> list[Verdict]:
    """Verify many completions; over a process pool when large (about 3-5 ms each)."""
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    pairs = list(zip(completions, golds, strict=True))
    if workers <= 1 or len(pairs) < min_parallel:
        return _verify_chunk(pairs)
    size = max(1, len(pairs) // (workers * 4))
    chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    # spawn: workers must not inherit torch's thread pools from a forked parent.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return [v for chunk in pool.map(_verify_chunk, chunks) for v in chunk]
