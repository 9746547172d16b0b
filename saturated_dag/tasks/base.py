"""A question as every stage of the pipeline sees it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


class DatasetFormatError(ValueError):
    """A dataset row that cannot be used, with its location (file and line, or row)."""


@dataclass(frozen=True)
class Question:
    """One verifiable problem.

    ``pool`` says where it comes from: ``D`` (target distribution) and ``D_prime`` (strictly
    easier, chain sum only) are training pools; ``eval`` is the held-out evaluation set.
    ``problem`` is the statement the judge sees; ``prompt_text`` the user message the policy
    answers (problem plus the boxed-answer instruction).
    """

    question_id: str
    task: str
    pool: str
    cell: str
    problem: str
    prompt_text: str
    gold: str
    meta: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """A flat record for tables (meta kept as its own columns)."""
        record = asdict(self)
        meta = record.pop("meta")
        record.update({f"meta_{k}": v for k, v in meta.items()})
        return record


def jsonl_rows(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, "file:line", row)`` for each non-blank line of a JSONL file.

    One reader for every dataset file, so a malformed line is always an error that names the
    file and the line.
    """
    with path.open("rb") as handle:  # bytes: a bad encoding is named by its line
        for line_no, raw in enumerate(handle, start=1):
            where = f"{path}:{line_no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DatasetFormatError(
                    f"{where}: not UTF-8 (byte {raw[err.start]:#04x} at column "
                    f"{err.start + 1}: {err.reason}); JSONL files are UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DatasetFormatError(f"{where}: invalid JSON ({err.msg})") from None
            yield line_no, where, row
