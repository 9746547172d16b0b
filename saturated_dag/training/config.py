"""What a trainer is built with besides the profile: the fixed settings, the precision, and
the record of an adapter's configuration.

The trainers are built straight from the profile's validated ``TrainingSettings``
(``saturated_dag.config``; ``training.train.trainer_config`` and ``lora_config``), so every
setting a profile can change reaches TRL's ``DPOConfig`` / ``SFTConfig`` and the project's
``RrhfConfig`` by one route. What a profile cannot change is here, as named constants.

Learning rates and epochs are the paper's for Qwen3-1.7B; the demo profile overrides them for
its small model. Batch sizes count training examples as the paper's Table 5 does: completions
(sequences) for SFT, RAFT and σ-RRHF, preference pairs for DPO (TRL's convention).
``batch_size`` examples make one optimizer step, ``per_device_batch_size`` go through one
forward pass, and the ratio is the number of gradient-accumulation micro-batches
(``grad_accumulation``). σ-RRHF never splits a question across micro-batches (its rank loss
compares a question's completions): a micro-batch holds
``max(1, per_device_batch_size // largest group)`` whole questions (``rrhf_questions_per_device``
in ``training.rrhf_trainer``), so with the paper's n = 8 and 8 completions per device batch a
micro-batch is one question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saturated_dag.config import TrainingSettings

# The trainer's fixed settings: the paper's (App. B, Table 5) for every method, constants
# here and not profile settings because no profile, sweep or selection of this project varies
# them (they never were fields of the profile's training section), so one place says what
# they are. Every adapter still records them (``settings_record``), so its model card and the
# runs table say what it trained with.
WARMUP_RATIO = 0.1
"""Linear warmup over this share of the optimizer steps, then cosine decay;
``train.warmup_guard`` drops it for runs of one optimizer step per epoch."""
WEIGHT_DECAY = 0.01
"""AdamW's weight decay for SFT, RAFT and σ-RRHF."""
DPO_WEIGHT_DECAY = 0.0
"""No weight decay for DPO (Ivison et al.)."""
LOGGING_STEPS = 1
"""The trainers log every optimizer step: the training log and the curves read each step
(``train._Progress`` and the adapter's metadata thin them for reading)."""
LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
"""LoRA on the attention projections; its rank, α and dropout are profile settings."""


def weight_decay(method: str) -> float:
    """AdamW's weight decay for ``method``: ``DPO_WEIGHT_DECAY`` for DPO, else
    ``WEIGHT_DECAY``."""
    return DPO_WEIGHT_DECAY if method == "dpo" else WEIGHT_DECAY


def grad_accumulation(training: TrainingSettings) -> int:
    """Micro-batches per optimizer step: ``batch_size / per_device_batch_size`` (a whole
    number: ``TrainingSettings`` refuses a batch that is not a multiple of the per-device
    batch)."""
    if training.batch_size % training.per_device_batch_size:
        raise ValueError(f"batch_size {training.batch_size} is not a multiple of "
                         f"per_device_batch_size {training.per_device_batch_size}")
    return training.batch_size // training.per_device_batch_size


DTYPES = ("auto", "float32", "bfloat16")


def resolve_dtype(name: str) -> str:
    """The training precision ``name`` means on this machine: ``float32`` or ``bfloat16``.

    auto picks bfloat16 only on a CUDA device that supports it (the GPU the paper profile is
    written for), float32 elsewhere. An explicit bfloat16 is honoured on a CPU (torch
    emulates it: slow, but it runs the same code path as on a GPU, which the tests use) and
    refused on a CUDA device without bf16 support, where training would fail later.
    """
    import torch

    if name not in DTYPES:
        raise ValueError(f"training dtype must be one of {DTYPES}, got {name!r}")
    cuda = torch.cuda.is_available()
    bf16_ok = cuda and torch.cuda.is_bf16_supported()
    if name == "auto":
        return "bfloat16" if bf16_ok else "float32"
    if name == "bfloat16" and cuda and not bf16_ok:
        raise ValueError("training dtype bfloat16: this CUDA device does not support bf16 "
                         f"({torch.cuda.get_device_name()}); use dtype float32 (or auto)")
    return name


RECORD_ENTRIES: dict[str, str | None] = {
    "epochs": "epochs", "batch_size": "batch_size",
    "per_device_batch_size": "per_device_batch_size", "learning_rate": "learning_rate",
    "warmup_ratio": None, "weight_decay": None, "max_length": "max_length", "seed": "seed",
    "logging_steps": None, "dtype": "dtype", "gradient_checkpointing": "gradient_checkpointing"}
"""A settings record's entries for every method, in its order, by the ``TrainingSettings``
field each holds (None: a fixed setting, ``fixed_entry``)."""
LORA_ENTRIES: dict[str, str | None] = {"r": "lora_r", "alpha": "lora_alpha",
                                       "dropout": "lora_dropout", "target_modules": None}
"""The record's ``lora`` entries, the same way."""
METHOD_ENTRIES: dict[str, dict[str, str | None]] = {
    "dpo": {"beta": "dpo_beta", "loss_type": "dpo_loss_type", "nll_weight": "dpo_nll_weight"},
    "rrhf": {"rank_weight": "rrhf_rank_weight", "use_sft": "rrhf_use_sft",
             "hinge": "rrhf_hinge", "logistic_weight": "rrhf_logistic_weight",
             "sft_token_mean": "rrhf_sft_token_mean"},
    "sft": {}, "raft": {}}
"""Each method's own entries, after the others, the same way."""


def fixed_entry(method: str, key: str) -> Any:
    """The value of the fixed setting a settings record holds under ``key``."""
    return {"warmup_ratio": WARMUP_RATIO, "weight_decay": weight_decay(method),
            "logging_steps": LOGGING_STEPS, "target_modules": list(LORA_TARGET_MODULES)}[key]


def settings_record(method: str, training: TrainingSettings) -> dict[str, Any]:
    """The configuration ``method`` trains with, as ``training_config.json`` records it under
    ``settings``: the profile's values the trainer reads and the fixed settings, flat, with
    the LoRA settings under ``lora`` and the method's own after them (β for DPO, λ and the
    σ-RRHF switches for σ-RRHF).

    Why a record and not the settings themselves: its keys and order are what the adapters
    already on disk hold and what their readers read (the model card, ``settings_summary``,
    the runs table's columns, the adapter's metadata), so they stay as they were when the
    trainer stopped reading them from per-method settings classes
    (``tests/test_training_request.py`` pins them)."""
    if method not in METHOD_ENTRIES:
        raise ValueError(f"unknown training method {method!r}; known: {sorted(METHOD_ENTRIES)}")

    def entries(table: dict[str, str | None]) -> dict[str, Any]:
        return {key: fixed_entry(method, key) if field is None else getattr(training, field)
                for key, field in table.items()}

    return {**entries(RECORD_ENTRIES), "lora": entries(LORA_ENTRIES),
            **entries(METHOD_ENTRIES[method])}


def training_of_record(record: dict[str, Any]) -> dict[str, Any]:
    """The ``TrainingSettings`` fields, with their values, that a ``settings_record`` holds:
    the inverse of ``settings_record`` for the settings a profile can change (the fixed
    settings in it are left out, and so is an entry this checkout does not know).

    Why a dict and not ``TrainingSettings``: a configuration stored as a record
    (``benchmarks/gpu_check_paper.json``'s cases) is trained again on a GPU machine without
    pydantic, where the trainer is built from these values as they are
    (``benchmarks.gpu_check.trainer_settings``); with pydantic,
    ``TrainingSettings(**training_of_record(record))`` validates them."""
    values: dict[str, Any] = {}
    for table, recorded in ((RECORD_ENTRIES, record), (LORA_ENTRIES, record.get("lora", {})),
                            *((own, record) for own in METHOD_ENTRIES.values())):
        values.update({field: recorded[key] for key, field in table.items()
                       if field is not None and key in recorded})
    return values


LOG_NAMES = {"loss": "loss", "rewards/margins": "reward margin",
             "rewards/accuracies": "reward accuracy", "rank_loss": "rank loss",
             "sft_loss": "sft loss", "learning_rate": "learning rate"}
"""The trainers' log keys a reader is shown (progress lines, the adapter's training log), by
the names they are shown under: DPO's reward margin and accuracy, σ-RRHF's two parts."""


def settings_summary(method: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The configuration an adapter was trained with, as a reader names it: ``settings`` is
    its ``settings_record``, as ``training_config.json`` records it.

    Why one function: the adapter's metadata and the run's tags say the same thing, and
    only the switches of the adapter's own method appear (β for DPO, λ and the σ-RRHF
    ablation switches for σ-RRHF)."""
    lora = settings["lora"]
    out: dict[str, Any] = {
        "learning rate": settings["learning_rate"],
        "batch size": settings["batch_size"],
        "per-device batch": settings["per_device_batch_size"],
        "epochs (max)": settings["epochs"],
        "warmup ratio": settings["warmup_ratio"],
        "weight decay": settings["weight_decay"],
        "max length": settings["max_length"],
    }
    if method == "dpo":
        out.update({"β (DPO)": settings["beta"], "DPO loss": settings["loss_type"],
                    "DPO NLL weight": settings.get("nll_weight", 0.0)})
    if method == "rrhf":
        out.update({"λ (rank weight)": settings["rank_weight"],
                    "σ-RRHF SFT term": settings["use_sft"],
                    "σ-RRHF hinge": settings["hinge"],
                    "σ-RRHF logistic weight": settings["logistic_weight"],
                    "σ-RRHF SFT token mean": settings["sft_token_mean"]})
    out.update({"LoRA r": lora["r"], "LoRA α": lora["alpha"], "LoRA dropout": lora["dropout"],
                "LoRA targets": ", ".join(lora["target_modules"]),
                "seed": settings["seed"], "dtype": settings["dtype"],
                "gradient checkpointing": settings["gradient_checkpointing"]})
    return out


def settings_line(method: str, settings: dict[str, Any]) -> str:
    """``settings_summary`` on one line (a run tag's value, a log line)."""
    parts = [method] + [f"{name} {value}" for name, value in
                        settings_summary(method, settings).items()]
    return " · ".join(parts)
