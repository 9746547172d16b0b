"""Validation pass@1 during training: the checkpoint selection of App. B.

After each epoch the trainer calls an ``EpochValidator`` on its model and the epoch's
snapshot folder: it samples the validation questions with the pool's and the eval reports'
prompts, sampling settings and answer rule (``reports.evaluate_samples``), writes that epoch's
per-question results and completions into the snapshot, and returns its pass@1. The trainer
keeps the epoch with the best and publishes its snapshot as the adapter, so the kept epoch's
results arrive in the adapter's folder with its weights, in the same rename (the
one-standard-error rule pairs them question by question).

Why a validator of its own and not a field of the training request: the request is what the
training reads (its data, settings and folder); the validator is how an epoch is judged, built
from the request's plain settings by the runner (``runner.validator_for``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from saturated_dag.generation.base import SamplingParams
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.verification import AnswerCheck

VALIDATION_FILE = "validation.parquet"
"""An epoch's per-question validation results (``question_id, n, correct``), in its snapshot
and so in the adapter's folder for the kept epoch: the one-standard-error selection rule pairs
configurations on them."""

VALIDATION_SAMPLES_FILE = "validation_samples.parquet"
"""An epoch's validation completions (``question_id, sample_index, completion, correct``),
beside ``VALIDATION_FILE``: what the model wrote, so an analysis can read more than right or
wrong (the DPO recipe search's style shift)."""


@dataclass
class EpochValidator:
    """Each epoch's validation pass@1 (as a fraction); its per-question results and completions
    written into the epoch's snapshot folder."""

    questions: Sequence[Question]
    params: SamplingParams
    answer_check: AnswerCheck
    batch_size: int
    """Validation prompts per sampling batch."""
    chat_template: Literal["auto", "always", "never"] = "auto"
    enable_thinking: bool | None = None

    def __call__(self, model: Any, tokenizer: Any, folder: Path) -> float:
        """The validation pass@1 of ``model`` now, as a fraction; its per-question results
        and completions written into ``folder`` (the epoch's snapshot), each with the content
        hash that ``read_proven_parquet`` checks."""
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
        folder = Path(folder)
        atomic_write_parquet(table.select("question_id", "n", "correct"), folder / VALIDATION_FILE)
        atomic_write_parquet(written.select("question_id", "sample_index", "completion",
                                            "correct"), folder / VALIDATION_SAMPLES_FILE)
        return summarise(table, ks=(1,))["pass@1"] / 100
