"""What a trainer is built with besides the profile: the fixed settings, the precision, each
method's training entry, and the record of an adapter's configuration.

The trainers are built straight from the profile's validated ``TrainingSettings``
(``saturated_dag.config``; ``training.train.trainer_config`` and ``lora_config``), so every
setting a profile can change reaches TRL's ``DPOConfig`` / ``SFTConfig`` and the project's
``RrhfConfig`` by one route. What a profile cannot change is here, as named constants.

How each method trains is one ``MethodTraining`` entry of ``METHOD_TRAINING`` (the columns its
training set needs, its config builder, its trainer, its weight decay, what its record holds
and how a reader names it); ``training.train`` reads the entry and never the method's name.

Learning rates and epochs are the paper's for Qwen3-1.7B; the demo profile overrides them for
its small model. Batch sizes count training examples as the paper's Table 5 does: completions
(sequences) for SFT, RAFT and σ-RRHF, preference pairs for DPO (TRL's convention).
``batch_size`` examples make one optimizer step, ``per_device_batch_size`` one forward pass;
the ratio is the gradient-accumulation micro-batches (``grad_accumulation``). σ-RRHF never
splits a question across micro-batches (its rank loss compares a question's completions:
``rrhf_trainer.rrhf_questions_per_device``), so with the paper's n = 8 and 8 completions per
device batch a micro-batch is one question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from saturated_dag.methods import method as registered_method

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
    """AdamW's weight decay for ``method``: its entry's (``DPO_WEIGHT_DECAY`` for DPO,
    ``WEIGHT_DECAY`` for the others)."""
    return method_training(method).weight_decay


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


ConfigBuilder = Callable[["TrainingSettings", dict[str, Any]], Any]
"""(the validated training settings, the arguments every method shares) -> the trainer's config
object (``train.trainer_config`` computes the shared arguments and calls it)."""


class TrainerFactory(Protocol):
    """Builds a method's trainer. ``data``: the training set (its ``columns`` checked present);
    ``args(per_device)``: the method's config for this run (``train.trainer_config``),
    ``per_device`` overriding the rows per forward pass when not None."""

    def __call__(self, model: Any, tokenizer: Any, data: Any, training: TrainingSettings,
                 columns: Sequence[str], args: Callable[[int | None], Any]) -> Any: ...


def _dpo_config(training: TrainingSettings, common: dict[str, Any]) -> Any:
    """TRL's ``DPOConfig``: the loss (``dpo_loss_type``, the paper's sigmoid by default), plus
    an NLL term on the chosen completion when ``dpo_nll_weight`` > 0 (not the paper's DPO):
    TRL combines the listed losses with ``loss_weights``."""
    from trl import DPOConfig

    nll_weight = training.dpo_nll_weight
    anchored = nll_weight > 0
    return DPOConfig(**common, beta=training.dpo_beta,
                     loss_type=[training.dpo_loss_type, *(["sft"] if anchored else [])],
                     loss_weights=[1.0, nll_weight] if anchored else None,
                     max_length=training.max_length)


def _sft_config(training: TrainingSettings, common: dict[str, Any]) -> Any:
    """TRL's ``SFTConfig``, the loss on the completion's tokens only."""
    from trl import SFTConfig

    return SFTConfig(**common, completion_only_loss=True, max_length=training.max_length)


def _rrhf_config(training: TrainingSettings, common: dict[str, Any]) -> Any:
    """The project's ``RrhfConfig``: σ-RRHF's λ and its ablation switches."""
    from saturated_dag.training.rrhf_trainer import RrhfConfig

    return RrhfConfig(**common, rank_weight=training.rrhf_rank_weight,
                      use_sft=training.rrhf_use_sft, hinge=training.rrhf_hinge,
                      logistic_weight=training.rrhf_logistic_weight,
                      sft_token_mean=training.rrhf_sft_token_mean,
                      max_length=training.max_length)


@dataclass(frozen=True)
class TrlTrainer:
    """TRL's trainer class ``name`` (``trl.DPOTrainer``, ``trl.SFTTrainer``) on the training
    set's ``columns`` as a ``datasets.Dataset`` (``train._dataset``), given the LoRA config:
    TRL wraps the model in the adapter itself."""

    name: str

    def __call__(self, model: Any, tokenizer: Any, data: Any, training: TrainingSettings,
                 columns: Sequence[str], args: Callable[[int | None], Any]) -> Any:
        import trl

        from saturated_dag.training import train

        return getattr(trl, self.name)(model=model, args=args(None), processing_class=tokenizer,
                                       train_dataset=train._dataset(data, list(columns)),
                                       peft_config=train.lora_config(training))


def _rrhf_trainer(model: Any, tokenizer: Any, data: Any, training: TrainingSettings,
                  columns: Sequence[str], args: Callable[[int | None], Any]) -> Any:
    """The project's ``RrhfTrainer``: one row per question (``train._rrhf_groups``), the
    collator expanding each into its completions, so the rank loss always sees whole groups;
    its batch counts questions (``rrhf_questions_per_device``). The model is wrapped in the
    LoRA adapter here (PEFT), as TRL's trainers do it themselves."""
    from datasets import Dataset
    from peft import get_peft_model

    from saturated_dag.training import train
    from saturated_dag.training.rrhf_trainer import (
        GroupCollator,
        RrhfTrainer,
        rrhf_questions_per_device,
    )

    del columns  # the groups read them
    groups = train._rrhf_groups(data)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    questions = rrhf_questions_per_device(training.per_device_batch_size,
                                          max(len(g["completions"]) for g in groups))
    peft_model = get_peft_model(model, train.lora_config(training))
    if training.gradient_checkpointing:
        # As TRL's trainers do with PEFT: harmless with non-reentrant checkpointing,
        # needed should reentrant checkpointing ever be configured.
        peft_model.enable_input_require_grads()
    config = args(questions)
    return RrhfTrainer(model=peft_model, args=config, train_dataset=Dataset.from_list(groups),
                       data_collator=GroupCollator(tokenizer, config.max_length,
                                                   add_special_tokens=not has_template),
                       processing_class=tokenizer)


@dataclass(frozen=True)
class MethodTraining:
    """How one training method trains: everything ``training.train`` and the adapter's record
    read about it.

    ``columns``: the training set's columns its trainer reads (refused when one is missing).
    ``config``: builds its config object from the settings. ``trainer``: builds its trainer.
    ``weight_decay``: AdamW's. ``record``: its own entries of the settings record, after the
    shared ones, by the ``TrainingSettings`` field each holds. ``summary``: the record entries a
    reader is shown, by the name shown (``settings_summary``). ``recorded_later``: the value of
    a summary entry that records written before it existed lack. ``full_logits``: its loss
    reads every token's full logits (σ-RRHF's rank loss), not TRL's fused LM-head tiles;
    ``reference_pass``: each step also runs the frozen reference model (DPO). The memory
    estimate (``training.memory``) reads both.

    Why here and not on ``methods.MethodSpec``: the plan, the tables and the profile read the
    method registry, which sits below the training stage and imports nothing of it; this entry
    names what trains a method. Keyed by the same names (a test checks both tables and
    ``config.Method`` agree). The builders import TRL, PEFT, datasets and the σ-RRHF trainer
    when called, so this module stays as cheap to import as the readers of a record need.
    """

    name: str
    columns: tuple[str, ...]
    config: ConfigBuilder
    trainer: TrainerFactory
    weight_decay: float = WEIGHT_DECAY
    record: Mapping[str, str] = field(default_factory=dict)
    summary: Mapping[str, str] = field(default_factory=dict)
    recorded_later: Mapping[str, Any] = field(default_factory=dict)
    full_logits: bool = False
    reference_pass: bool = False


METHOD_TRAINING: dict[str, MethodTraining] = {entry.name: entry for entry in (
    MethodTraining(
        "dpo", columns=("prompt", "chosen", "rejected"), config=_dpo_config,
        trainer=TrlTrainer("DPOTrainer"), weight_decay=DPO_WEIGHT_DECAY,
        record={"beta": "dpo_beta", "loss_type": "dpo_loss_type",
                "nll_weight": "dpo_nll_weight"},
        summary={"β (DPO)": "beta", "DPO loss": "loss_type", "DPO NLL weight": "nll_weight"},
        recorded_later={"nll_weight": 0.0}, reference_pass=True),
    MethodTraining(
        "rrhf", columns=("question_id", "prompt", "completion", "score"), config=_rrhf_config,
        trainer=_rrhf_trainer,
        record={"rank_weight": "rrhf_rank_weight", "use_sft": "rrhf_use_sft",
                "hinge": "rrhf_hinge", "logistic_weight": "rrhf_logistic_weight",
                "sft_token_mean": "rrhf_sft_token_mean"},
        summary={"λ (rank weight)": "rank_weight", "σ-RRHF SFT term": "use_sft",
                 "σ-RRHF hinge": "hinge", "σ-RRHF logistic weight": "logistic_weight",
                 "σ-RRHF SFT token mean": "sft_token_mean"}, full_logits=True),
    MethodTraining("sft", columns=("prompt", "completion"), config=_sft_config,
                   trainer=TrlTrainer("SFTTrainer")),
    MethodTraining("raft", columns=("prompt", "completion"), config=_sft_config,
                   trainer=TrlTrainer("SFTTrainer")),
)}
"""Method name -> its training entry, in ``methods.METHODS``' order. Adding a method is an
entry here and one in ``methods.METHODS`` (``docs/extending.md``)."""


def method_training(name: str) -> MethodTraining:
    """The training entry of method ``name``; an unknown name is ``methods.method``'s error,
    which names the known ones."""
    registered_method(name)
    return METHOD_TRAINING[name]


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
    (``tests/training/test_training_request.py`` pins them)."""
    own = method_training(method).record

    def entries(table: Mapping[str, str | None]) -> dict[str, Any]:
        return {key: fixed_entry(method, key) if name is None else getattr(training, name)
                for key, name in table.items()}

    return {**entries(RECORD_ENTRIES), "lora": entries(LORA_ENTRIES), **entries(own)}


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
    tables: list[tuple[Mapping[str, str | None], dict[str, Any]]] = [
        (RECORD_ENTRIES, record), (LORA_ENTRIES, record.get("lora", {})),
        *((entry.record, record) for entry in METHOD_TRAINING.values())]
    for table, recorded in tables:
        values.update({name: recorded[key] for key, name in table.items()
                       if name is not None and key in recorded})
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
    entry = METHOD_TRAINING.get(method)  # a method this checkout lacks: the shared ones only
    if entry is not None:
        out.update({name: settings[key] if key in settings else entry.recorded_later[key]
                    for name, key in entry.summary.items()})
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
