"""GSM8K from a local folder of ``train.jsonl``/``test.jsonl`` or a hub dataset id.

The gold is the text after ``####`` with thousands separators removed. Malformed rows are
errors that name the file and line: a silently dropped row would change the pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from saturated_dag.tasks.base import DatasetFormatError, Question, jsonl_rows
from saturated_dag.tasks.prompts import policy_prompt

TASK = "gsm8k"
SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}
POOL_OF_SPLIT = {"train": "D", "test": "eval"}


def parse_gold(answer: str, where: str) -> str:
    """The final answer after ``####``, commas removed; must be a number."""
    if "####" not in answer:
        raise DatasetFormatError(f"{where}: answer has no '####' final-answer marker")
    gold = answer.rsplit("####", 1)[1].strip().replace(",", "")
    try:
        float(gold)
    except ValueError:
        raise DatasetFormatError(f"{where}: final answer {gold!r} is not a number") from None
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
