"""A question as every stage of the pipeline sees it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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
