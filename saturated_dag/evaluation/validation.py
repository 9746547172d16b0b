"""Validation pass@1 during training: the checkpoint selection of App. B.

After each epoch the trainer calls an ``EpochValidator`` on its model: it samples the
validation questions with the pool's and the eval reports' prompts, sampling settings and
answer rule (``reports.evaluate_samples``), keeps that epoch's per-question results and
completions, and returns its pass@1. The trainer keeps the epoch with the best; the runner
publishes that epoch's results beside the adapter (the one-standard-error rule pairs them
question by question) with ``EpochValidator.kept``.

Why a validator of its own and not a field of the training request: the request is what the
training reads (its data, settings and folder); the validator is how an epoch is judged, built
from the request's plain settings by the runner (``runner.validator_for``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from saturated_dag.generation.base import SamplingParams
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.verification import AnswerCheck


@dataclass
class EpochValidator:
    """Each epoch's validation pass@1 (as a fraction), with its per-question results and
    completions kept in epoch order."""

    questions: Sequence[Question]
    params: SamplingParams
    answer_check: AnswerCheck
    batch_size: int
    """Validation prompts per sampling batch."""
    chat_template: Literal["auto", "always", "never"] = "auto"
    enable_thinking: bool | None = None
    per_epoch: list[pl.DataFrame] = field(default_factory=list)
    """Each epoch's per-question results (``question_id``, ``n``, ``correct``)."""
    samples: list[pl.DataFrame] = field(default_factory=list)
    """Each epoch's completions (``question_id``, ``sample_index``, ``completion``,
    ``correct``)."""

    def __call__(self, model: Any, tokenizer: Any) -> float:
        """The validation pass@1 of ``model`` now, as a fraction; its results are kept."""
        from saturated_dag.evaluation.reports import (
            evaluate_samples,
            per_question_results,
            summarise,
        )
        from saturated_dag.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend(model, tokenizer, batch_size=self.batch_size,
                                      chat_template=self.chat_template)
        # the same prompts and answer rule as the pool and the eval reports
        backend.enable_thinking = self.enable_thinking
        written = evaluate_samples(self.questions, backend, self.params,
                                   answer_check=self.answer_check)
        table = per_question_results(written)
        self.per_epoch.append(table.select("question_id", "n", "correct"))
        self.samples.append(written.select("question_id", "sample_index", "completion",
                                           "correct"))
        return summarise(table, ks=(1,))["pass@1"] / 100

    def kept(self, epoch: int) -> tuple[pl.DataFrame, pl.DataFrame] | None:
        """Epoch ``epoch``'s (1-based) per-question results and completions; None when no
        epoch was validated."""
        if not self.per_epoch:
            return None
        return self.per_epoch[epoch - 1], self.samples[epoch - 1]
