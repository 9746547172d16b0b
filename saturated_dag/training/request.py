"""``TrainingRequest``: one adapter's training, as one validated object of plain settings from
the asset to the trainer.

Why a model and not a dict: the request crosses a process boundary (the Dagster Pipes child,
``resources/training_child.py``, a side-by-side worker, or
``python -m saturated_dag.training.runner``). It is validated where it is built and again
where it arrives (``TrainingRequest.from_json``), so a misspelt or missing field fails with its
name in the parent or the child, never as a ``KeyError`` halfway through training.

Why plain settings: everything the training reads is resolved once, where the plan is
(``training.resolve.adapter_request``): the cell's training settings with its overrides merged
and validated, the validation questions, how they are sampled and scored, and how many worker
processes train side by side. The child rebuilds nothing from a profile; the trainer is built
from ``training`` directly (``training.train.trainer_config``, ``training.train.lora_config``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from saturated_dag.config import Method, SamplingSettings, TaskName, TrainingSettings
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.verification import AnswerCheck


class TrainingRequest(BaseModel):
    """Everything a training process needs to train one adapter (JSON-serialisable)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: TaskName
    method: Method
    training: TrainingSettings
    """The cell's training settings: the profile's, with the cell's overrides (a sweep's λ, β,
    learning rate, seed, a recipe) merged and validated."""
    sampling: SamplingSettings
    """How the validation questions are sampled (the pool's and the eval reports' settings)."""
    answer_check: AnswerCheck
    """How a validation completion is marked correct (the pool's and the eval reports' rule)."""
    validation: list[Question]
    """The checkpoint-selection questions (App. B): the kept epoch has the best pass@1 on them."""
    report_to: Literal["mlflow", "none"] = "none"
    """The trainers' ``report_to``: ``mlflow`` when the profile tracks runs."""
    workers: int = Field(0, ge=0)
    """Processes that train a step's requests side by side, one torch thread each (0: in the
    training process itself, torch's own threads; ``infra.parallel.training_workers``)."""
    base_model: str = Field(min_length=1)
    batch_size: int = Field(ge=1)
    """Validation prompts per sampling batch (``training.validation_batch_size``)."""
    chat_template: Literal["auto", "always", "never"] = "auto"
    enable_thinking: bool | None = None
    data: str = Field(min_length=1)
    """The training set's Parquet file."""
    out_dir: str = Field(min_length=1)
    """Where the adapter is published."""
    record: dict[str, Any] = Field(default_factory=dict)
    """Added to the adapter's ``training_config.json`` (its cache key)."""
    tracking_env: dict[str, str] = Field(default_factory=dict)
    """Environment for the trainers' MLflow callback (``saturated_dag.reporting.tracking``)."""

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "training request") -> TrainingRequest:
        """The request in ``text``, validated; an invalid one names its fields and ``source``."""
        from pydantic import ValidationError

        try:
            return cls.model_validate_json(text)
        except ValidationError as err:
            raise ValueError(f"invalid {source}: {err}") from None
