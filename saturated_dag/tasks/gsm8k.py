"""GSM8K from a local folder of ``train.jsonl``/``test.jsonl`` or a hub dataset id.

The gold is the text after ``####`` with thousands separators (commas) removed, and must then
be a plain decimal number: ASCII digits, an optional leading ``-`` and an optional decimal
point. Every gold is also checked at load with the answer checker itself (both modes of
``saturated_dag.tasks.verification``): a boxed correct answer must be marked right. Without that a
gold such as ``1e3`` or ``1_000`` loads and every right ``\\boxed{1000}`` scores as wrong, and a
full-width ``１０００`` crashes answer checking far from the file. Malformed rows are errors that
name the file and line: a silently dropped row would change the pool.

A question's id is ``gsm8k/<split>/<line number - 1>``, counting every line of the file, blank
ones included, so a blank line never renumbers the rows above it (hub rows use their index).
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from saturated_dag.tasks.base import DatasetFormatError, Question, jsonl_rows
from saturated_dag.tasks.prompts import policy_prompt
from saturated_dag.tasks.verification import MAX_ANSWER_CHARS, unmatched_answer_checks

TASK = "gsm8k"
SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}
POOL_OF_SPLIT = {"train": "D", "test": "eval"}

_PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
"""What a gold may be after comma removal; ASCII only (``str.isdigit`` accepts ``１``)."""


def _plain_form(gold: str) -> str:
    """The value as a model would box it: ``007`` -> ``7``, ``12.50`` -> ``12.5``."""
    value = Decimal(gold)
    return format(value.normalize(), "f") if value else "0"


@lru_cache(maxsize=4096)
def _unmatched(gold: str) -> tuple[str, ...]:
    """``"<mode> marks \\boxed{x} wrong"`` for each failure; cached, as golds repeat often."""
    problems = []
    for answer in dict.fromkeys((gold, _plain_form(gold))):
        problems += [f"answer check {mode!r} marks \\boxed{{{answer}}} wrong"
                     for mode in unmatched_answer_checks(gold, answer)]
    return tuple(problems)


def parse_gold(answer: str, where: str) -> str:
    """The final answer after ``####``, commas removed; a plain number the checker can match."""
    if "####" not in answer:
        raise DatasetFormatError(f"{where}: answer has no '####' final-answer marker")
    gold = answer.rsplit("####", 1)[1].strip().replace(",", "")
    if not _PLAIN_NUMBER.fullmatch(gold):
        raise DatasetFormatError(
            f"{where}: final answer {gold!r} is not a number in plain decimal form: expected "
            "ASCII digits with an optional leading '-' and decimal point, thousands commas "
            "allowed (no exponent, underscores, nan/inf, spaces or non-ASCII digits)"
        )
    if len(gold) > MAX_ANSWER_CHARS:  # the checker marks longer answers wrong unparsed
        raise DatasetFormatError(
            f"{where}: final answer has {len(gold)} characters; the answer checker marks "
            f"answers over {MAX_ANSWER_CHARS} characters wrong, so no completion could match it"
        )
    problems = _unmatched(gold)
    if problems:
        raise DatasetFormatError(
            f"{where}: final answer {gold!r} cannot be matched by the answer checker "
            f"({'; '.join(problems)}): a correct completion would be scored wrong"
        )
    return gold


def _question(split: str, index: int, row: Any, where: str) -> Question:
    if not isinstance(row, dict):
        raise DatasetFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key in ("question", "answer"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise DatasetFormatError(f"{where}: missing or empty field {key!r}")
    problem = row["question"].strip()
    return Question(
        question_id=f"{TASK}/{split}/{index}",
        task=TASK,
        pool=POOL_OF_SPLIT[split],
        cell="",
        problem=problem,
        prompt_text=policy_prompt(problem),
        gold=parse_gold(row["answer"], where),
        meta={"reference_solution": row["answer"]},
    )


def _read_jsonl(path: Path, split: str, limit: int | None) -> list[Question]:
    if not path.is_file():
        raise FileNotFoundError(f"GSM8K {split} file not found: {path}")
    questions: list[Question] = []
    for line_no, where, row in jsonl_rows(path):
        questions.append(_question(split, line_no - 1, row, where))
        if limit is not None and len(questions) >= limit:
            break  # before reading the next line: rows past the limit are never parsed
    if not questions:
        raise DatasetFormatError(f"{path}: no rows")
    return questions


def _read_hub(dataset_id: str, split: str, limit: int | None) -> list[Question]:
    from datasets import load_dataset

    try:
        rows = load_dataset(dataset_id, "main", split=split)
    except Exception as err:  # offline, unknown id: say which source failed
        raise FileNotFoundError(
            f"GSM8K source {dataset_id!r} is neither a local folder nor a loadable hub "
            f"dataset ({type(err).__name__}: {err})"
        ) from err
    count = len(rows) if limit is None else min(limit, len(rows))
    return [
        _question(split, i, rows[i], f"{dataset_id}[{split}][{i}]") for i in range(count)
    ]


def load_split(source: str, split: str, limit: int | None = None) -> list[Question]:
    """Questions of ``split`` ("train" or "test") from a local folder or a hub dataset id."""
    if split not in SPLIT_FILES:
        raise ValueError(f"GSM8K split must be one of {sorted(SPLIT_FILES)}, got {split!r}")
    path = Path(source).expanduser()
    if path.is_dir():
        return _read_jsonl(path / SPLIT_FILES[split], split, limit)
    if path.exists() or source.startswith((".", "/", "~")):
        raise FileNotFoundError(f"GSM8K folder not found: {path}")
    return _read_hub(source, split, limit)
