"""One adapter's training resolved from the profile: its cache key and its request.

The profile is read here, once per adapter, and what the training needs leaves as plain
settings (``TrainingRequest``): the adapter asset and the training process read no profile.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from saturated_dag.config import PolicySettings, Profile
from saturated_dag.data.questions import validation_questions
from saturated_dag.experiments import Adapter
from saturated_dag.infra.parallel import training_workers
from saturated_dag.infra.shards import frame_digest, questions_digest
from saturated_dag.training.config import resolve_dtype
from saturated_dag.training.folders import training_key
from saturated_dag.training.request import TrainingRequest

KEY_EXCLUDES = {"isolate", "sweeps", "validation_batch_size"}
"""Training settings that say where and how a training runs, not what it trains: not part of
the cache key."""


def adapter_cache_key(profile: Profile, task: str, exp: Adapter, code_version: str, policy: dict,
                data: pl.DataFrame) -> str:
    """What the adapter is a function of: data, training and sampling settings, base model
    (``policy``: its identity), validation set (epoch selection) and code. Where it runs
    (``isolate``) is not part of it."""
    training = exp.training(profile.training).model_dump(mode="json", exclude=KEY_EXCLUDES)
    training["dtype"] = resolve_dtype(training["dtype"])  # auto: what it means on this machine
    return training_key(code_version, exp.method, training, policy,
                        profile.sampling.model_dump(mode="json"), profile.answer_check,
                        questions_digest(validation_questions(profile, task)),
                        frame_digest(data))


def adapter_request(profile: Profile, task: str, exp: Adapter, policy: PolicySettings,
                    data_path: Path, out: Path, key: str,
                    tracking_env: dict[str, str]) -> TrainingRequest:
    """What the training process needs, as plain settings: the cell's validated training
    settings, its validation questions and how they are sampled and scored, the data's file,
    and how it samples (the policy's prompts, ``validation_batch_size`` rows a batch: the
    policy's own batch size is the vLLM engine's, far too large beside a trainer on one GPU).
    ``tracking_env``: the trainer's MLflow environment (``reporting.tracking``; not part of
    the adapter's cache key: tracking does not change the weights)."""
    return TrainingRequest(
        task=task, method=exp.method, training=exp.training(profile.training),
        sampling=profile.sampling, answer_check=profile.answer_check,
        validation=validation_questions(profile, task),
        report_to=profile.tracking.report_to, workers=training_workers(profile),
        base_model=policy.model, batch_size=profile.training.validation_batch_size,
        chat_template=policy.chat_template, enable_thinking=policy.enable_thinking,
        data=str(data_path), out_dir=str(out), record={"cache_key": key},
        tracking_env=tracking_env)
