"""``TrainingRequest``: one adapter's training, as one validated object from the asset to the
trainer.

Why a model and not a dict: the request crosses a process boundary (the Dagster Pipes child,
``resources/training_child.py``, a side-by-side worker, or
``python -m saturated_dag.training.runner``). It is validated where it is built and again
where it arrives (``TrainingRequest.from_json``), so a misspelt or missing field fails with its
name in the parent or the child, never as a ``KeyError`` halfway through training. The
training settings it carries are the profile's ``training`` section with the cell's overrides
applied *and validated* (``training``), from which the trainer is built directly
(``training.train.trainer_config``: TRL's ``DPOConfig`` / ``SFTConfig``, σ-RRHF's
``training.rrhf_trainer.RrhfConfig``; ``training.train.lora_config``: PEFT's ``LoraConfig``),
on every route (``training.runner``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from saturated_dag.config import Method, Profile, TaskName, TrainingSettings
from saturated_dag.profiles import merge_settings


class TrainingRequest(BaseModel):
    """Everything a training process needs to train one adapter (JSON-serialisable)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: Profile
    task: TaskName
    method: Method
    training_overrides: dict[str, Any] = Field(default_factory=dict)
    """The cell's overrides of ``profile.training`` (a sweep's λ, β, learning rate, seed) and
    the per-device batch they imply (``assets.adapters.training_overrides``)."""
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

    @model_validator(mode="after")
    def _overrides_are_valid(self) -> TrainingRequest:
        self.training  # noqa: B018  (validates the overrides now, naming the bad field)
        return self

    @property
    def training(self) -> TrainingSettings:
        """The profile's training section with this request's overrides, validated."""
        merged = merge_settings(self.profile.training.model_dump(mode="json"),
                                self.training_overrides)
        return TrainingSettings.model_validate(merged)

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
