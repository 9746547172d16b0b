"""The ``paper`` profile's GPU rates, measured at Qwen3-1.7B-Base's real shapes: one prepared
check for an offline GPU machine (``scripts/gpu_check.sh``), run on CPU at toy shapes by the
default test suite (``tests/project/test_gpu_check.py``) so that it never rots between GPU runs.

Why: docs/paper-run.md prices the profile at an *assumed* training MFU and validation sampling
rate, and lists what this check times in their place through the project's own code (each
method's LoRA step by ``training/train.py``'s builder, validation sampling, the entropy pass, a
model's load, an adapter's save and load), each the median of repetitions after warm-up. The
model has Qwen3-1.7B-Base's configuration with random bf16 weights and a word-level tokenizer
spanning its vocabulary: no row stops early and top-p takes its full-sort path at every step,
so the sampling rate is, if anything, pessimistic.

The shapes are computed here (``--write-shapes``: ``benchmarks/gpu_check_paper.json``, kept
equal by a test): the GPU machine lacks pydantic, polars, reasoning-gym and math-verify. Each of
the last three gets an import-only stand-in (``install_stand_ins``, named in the JSON) that
raises on use; the dry-run test forces them.

    python -m benchmarks.gpu_check --shapes paper --out gpu_check.json        # on the GPU
    python -m benchmarks.gpu_check --shapes toy --device cpu --out toy.json   # a dry run
    python -m benchmarks.gpu_check --write-shapes benchmarks/gpu_check_paper.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saturated_dag.training.memory import ModelShape

ROOT = Path(__file__).resolve().parents[1]
PAPER_SHAPES = ROOT / "benchmarks" / "gpu_check_paper.json"
SCHEMA = 1
KIND = "gpu_check"
"""The JSON's ``kind``; ``saturated_dag.reporting.paper_cost.measured_throughput`` reads only
this."""

STAND_INS = ("polars", "reasoning_gym", "math_verify")
"""Packages the measured modules import (through ``saturated_dag.tasks`` and
``training/train.py``) but never call on the measured paths; too large to carry (polars'
runtime is 54 MB) or not built for the GPU machine's Python (reasoning-gym needs pycosat)."""

VERSIONED = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
             "safetensors", "huggingface_hub", "numpy", "pyarrow", "fsspec", "dill",
             "multiprocess")

PEAK_BF16_FLOPS = (("H100", "PCIe", 756e12), ("H100", "NVL", 835e12), ("H200", "NVL", 835e12),
                   ("H100", "", 989e12), ("H200", "", 989e12))
"""Dense BF16 tensor-core peaks (NVIDIA's datasheets: H100 SXM and H200 SXM 989 TFLOPS, H100
NVL and H200 NVL 835, H100 PCIe 756), matched on the device's name in this order: the MFU's
denominator. Another device gets no MFU unless ``--peak-tflops`` names its peak."""


# --------------------------------------------------------------------------------------------
# Import-only stand-ins


class _AbsentMeta(type):
    """Any name looked up on an absent class is another absent class."""

    def __getattr__(cls, attr: str) -> type:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _absent(f"{cls.__qualname__}.{attr}")


class _Absent(metaclass=_AbsentMeta):
    """What a stand-in module gives for any name: a class, so that a probe such as
    ``isinstance(x, polars.DataFrame)`` (datasets makes it) answers False, which no instance
    of can be made: calling it fails, loudly."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{cls.__qualname__} is an import-only stand-in on this machine "
                           "(the GPU check's measured paths were not expected to use it)")


def _absent(name: str) -> type:
    return _AbsentMeta(name.rsplit(".", 1)[-1], (_Absent,), {"__qualname__": name})


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves an empty package for every module under ``roots``, ahead of the real finders."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = frozenset(roots)

    def find_spec(self, name: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: _absent(f"{spec.name}.{attr}")  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_stand_ins(hide: Sequence[str] = ()) -> list[str]:
    """Put an import-only stand-in in place of each of ``STAND_INS`` that is not installed (or
    is named in ``hide``: the dry run's way to prove the measured paths never use them);
    returns the names replaced. Must run before any ``saturated_dag`` import."""
    unknown = set(hide) - set(STAND_INS)
    if unknown:
        raise ValueError(f"only {STAND_INS} can be hidden, not {sorted(unknown)}")
    missing = [n for n in STAND_INS if n in hide or importlib.util.find_spec(n) is None]
    loaded = [m for m in sys.modules if m.split(".")[0] in missing]
    if loaded:
        raise RuntimeError(f"already imported, cannot be replaced: {sorted(loaded)}")
    if missing:
        sys.meta_path.insert(0, _StandIns(missing))
    return missing


# --------------------------------------------------------------------------------------------
# Shapes: what is measured, at which sizes


@dataclass(frozen=True)
class TrainCase:
    """One method's optimizer step on one task's sequences: ``settings`` is the method's
    configuration as an adapter records it (``training.config.settings_record``); ``group``
    the completions of a σ-RRHF question (1 for the other methods)."""

    task: str
    method: str
    prompt_tokens: int
    completion_tokens: int
    group: int
    settings: dict[str, Any]


@dataclass(frozen=True)
class SamplingCase:
    """One validation batch: ``prompts`` x ``n`` rows over ``slots`` decoder slots."""

    task: str
    prompts: int
    n: int
    slots: int
    prompt_tokens: int
    max_new_tokens: int
    temperature: float
    top_p: float


@dataclass(frozen=True)
class EntropyCase:
    """``sequences`` teacher-forced entropy calls, one completion each, ``chunk`` positions of
    the output head at a time (the entropy scorer's default)."""

    task: str
    sequences: int
    prompt_tokens: int
    completion_tokens: int
    chunk: int = 256


@dataclass(frozen=True)
class Shapes:
    """Everything the check measures. ``warmup_steps`` optimizer steps run untimed before the
    ``timed_steps``; sampling, entropy and loads run once untimed, then ``repeats`` times."""

    name: str
    source: str
    model: ModelShape
    """The policy's architecture (``training.memory.ModelShape``, the memory model's own)."""
    dtype: str
    """The weights' and training's precision (``training.dtype``)."""
    training: tuple[TrainCase, ...]
    sampling: tuple[SamplingCase, ...]
    entropy: tuple[EntropyCase, ...]
    checkpointing: tuple[bool, ...] = (True, False)
    warmup_steps: int = 2
    timed_steps: int = 3
    repeats: int = 3

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (lists, not tuples): what the file holds and reads back."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Shapes:
        from saturated_dag.training.memory import ModelShape

        return cls(**{**data, "model": ModelShape(**data["model"]),
                      "training": tuple(TrainCase(**c) for c in data["training"]),
                      "sampling": tuple(SamplingCase(**c) for c in data["sampling"]),
                      "entropy": tuple(EntropyCase(**c) for c in data["entropy"]),
                      "checkpointing": tuple(data["checkpointing"])})


def shapes_from_profile(name: str = "paper", entropy_sequences: int = 64) -> Shapes:
    """The check's shapes for profile ``name``: its policy's architecture, each (task, method)
    it trains at the cost table's mean lengths with the method's trainer settings, its
    validation batch, and the entropy pass at the scored completions' lengths. Needs the
    whole environment (pydantic, polars): run here, not on the GPU machine."""
    from saturated_dag.profiles import load_profile
    from saturated_dag.reporting import paper_cost as pc
    from saturated_dag.training.config import settings_record
    from saturated_dag.training.memory import KNOWN_SHAPES

    profile = load_profile(name)
    shape = KNOWN_SHAPES[profile.policy.model]
    assumptions = pc.paper_assumptions()
    n = profile.sampling.n
    training = tuple(
        TrainCase(task, method, round(lengths.prompt), round(lengths.completion),
                  n if method == "rrhf" else 1,
                  settings_record(method, profile.training))
        for (task, method), lengths in sorted(pc.training_lengths(profile, assumptions).items()))
    slots = profile.training.validation_batch_size
    sampling = tuple(
        SamplingCase(task, max(1, slots // n), n, slots,
                     round(assumptions.task(task).length("validation").prompt),
                     round(assumptions.task(task).length("validation").completion),
                     profile.sampling.temperature, profile.sampling.top_p)
        for task in profile.tasks)
    entropy = tuple(EntropyCase(task, entropy_sequences, round(lengths.prompt),
                                round(lengths.completion))
                    for task, lengths in pc.entropy_lengths(profile, assumptions).items())
    return Shapes(
        name=name,
        source=(f"profile {name} ({profile.policy.model}) and the cost table's assumptions "
                "(saturated_dag/reporting/paper_cost.py); regenerate with "
                "python -m benchmarks.gpu_check --write-shapes benchmarks/gpu_check_paper.json"),
        model=shape, dtype=profile.training.dtype,
        training=training, sampling=sampling, entropy=entropy,
        checkpointing=(profile.training.gradient_checkpointing,
                       not profile.training.gradient_checkpointing))


TOY_TRAINING: dict[str, Any] = {
    "epochs": 1, "batch_size": 4, "per_device_batch_size": 2, "learning_rate": 1e-5,
    "max_length": 64, "seed": 0, "dtype": "float32", "gradient_checkpointing": False,
    "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.05, "dpo_beta": 0.1, "dpo_nll_weight": 0.0,
    "dpo_loss_type": "sigmoid",
    "rrhf_rank_weight": 0.1, "rrhf_use_sft": True, "rrhf_hinge": True,
    "rrhf_logistic_weight": True, "rrhf_sft_token_mean": True}
"""The dry run's training settings, ``TrainingSettings``' fields the trainer reads (two
micro-batches per step, a small LoRA); plain values, because the dry run proves the GPU
machine's path, which has no pydantic (``tests/project/test_gpu_check.py`` validates them)."""


def toy_shapes() -> Shapes:
    """A tiny model and short sequences for the CPU dry run: every code path of the GPU run
    (two micro-batches per step, both checkpointing settings, every method) in seconds."""
    from saturated_dag.training.config import settings_record
    from saturated_dag.training.memory import ModelShape

    def settings(method: str) -> dict[str, Any]:
        return settings_record(method, types.SimpleNamespace(**TOY_TRAINING))

    return Shapes(
        name="toy", source="benchmarks/gpu_check.py toy_shapes (a dry run)",
        model=ModelShape(layers=2, hidden=32, intermediate=64, heads=4, kv_heads=2,
                         head_dim=8, vocab=256, tied=True),
        dtype="float32",
        training=tuple(TrainCase("chain_sum", m, 5, 7, 2 if m == "rrhf" else 1, settings(m))
                       for m in ("dpo", "rrhf", "sft")),
        sampling=(SamplingCase("chain_sum", 2, 2, 4, 5, 6, 0.6, 0.95),),
        entropy=(EntropyCase("chain_sum", 3, 5, 7),),
        warmup_steps=1, timed_steps=2, repeats=2)


def load_shapes(spec: str) -> Shapes:
    """``toy``, ``paper`` (the committed ``benchmarks/gpu_check_paper.json``) or a JSON path."""
    if spec == "toy":
        return toy_shapes()
    path = PAPER_SHAPES if spec == "paper" else Path(spec)
    return Shapes.from_json(json.loads(path.read_text()))


# --------------------------------------------------------------------------------------------
# The model and its tokenizer

EOS = "<|endoftext|>"


def word(i: int, vocab: int) -> str:
    """The text of token id ``i`` (never the EOS, id 0)."""
    return f"w{1 + i % (vocab - 1)}"


def words(count: int, seed: int, vocab: int) -> str:
    """``count`` tokens of text, different for each ``seed``."""
    return " ".join(word(seed * 7919 + 31 * k, vocab) for k in range(count))


def word_tokenizer(vocab: int) -> Any:
    """A whitespace word-level tokenizer with one id per vocabulary entry: ``w<i>`` is id i,
    the EOS (also the pad, as Qwen3-Base's ``<|endoftext|>``) id 0. Every sampled id decodes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    table = {EOS: 0, **{f"w{i}": i for i in range(1, vocab)}}
    core = Tokenizer(models.WordLevel(table, unk_token=EOS))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=EOS)


def build_model(spec: ModelShape, dtype: str, folder: Path, device: str) -> Path:
    """Random weights at ``spec``'s shapes in ``dtype``, saved as a downloaded model is (config,
    safetensors, tokenizer), so that ``load_model`` reads it as it reads Qwen3-1.7B-Base."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads, head_dim=spec.head_dim,
        tie_word_embeddings=spec.tied, rms_norm_eps=1e-6, max_position_embeddings=32768,
        bos_token_id=None, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: 1.7B on a CPU takes long
        model = Qwen3ForCausalLM(config)
    model.to(getattr(torch, dtype)).save_pretrained(folder)
    word_tokenizer(spec.vocab).save_pretrained(folder)
    del model
    return folder


def matmul_parameters(model: Any) -> int:
    """Weights a token multiplies through (``paper_cost.matmul_parameters``' count): every
    parameter, less an untied input embedding (a lookup)."""
    total = sum(p.numel() for p in model.parameters())
    tied = model.get_input_embeddings().weight is model.get_output_embeddings().weight
    return total - (0 if tied else model.get_input_embeddings().weight.numel())


# --------------------------------------------------------------------------------------------
# Timing


def synchronizer(device: str) -> Callable[[], None]:
    """Waits for the device's queued work (a no-op on CPU): every timer reads after it."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def timed(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]
          ) -> tuple[list[float], Any]:
    """Seconds of ``repeats`` calls of ``fn`` after one untimed warm-up call; its last result."""
    result = fn()
    seconds = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        result = fn()
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds, result


@contextlib.contextmanager
def peak_memory(device: str) -> Iterator[dict[str, int | None]]:
    """The device memory held when the block starts and its peak inside (None on CPU, where
    torch keeps no allocator statistics)."""
    import torch

    out: dict[str, int | None] = {"memory_before_bytes": None, "peak_memory_bytes": None}
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        out["memory_before_bytes"] = torch.cuda.memory_allocated()
    yield out
    if cuda:
        torch.cuda.synchronize()
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()


def free(device: str) -> None:
    """Return what the last measurement held, so the next one starts from the same memory."""
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# Training


def trainer_settings(case: TrainCase, checkpointing: bool) -> types.SimpleNamespace:
    """The training settings the case's record was made from
    (``training.config.training_of_record``), with ``checkpointing``: what the trainer is
    built from, by the pipeline's own route (``train.trainer_config``, ``train.lora_config``).

    A namespace of ``TrainingSettings``' fields, not the pydantic model: the GPU machine has
    no pydantic, and the trainer only reads the fields. An entry this checkout does not know
    is left out (the shapes file may be a commit newer); ``tests/project/test_gpu_check.py``
    keeps the committed shapes equal to what the profile gives and checks that these values
    build the trainer config the validated settings build, so nothing the profile sets is lost
    unnoticed."""
    from saturated_dag.training.config import training_of_record

    return types.SimpleNamespace(**{**training_of_record(case.settings),
                                    "gradient_checkpointing": checkpointing})


def training_rows(case: TrainCase, examples: int, vocab: int) -> list[dict[str, Any]]:
    """``examples`` rows in the shape the method's trainer reads: DPO prompt/chosen/rejected,
    SFT prompt/completion, σ-RRHF one question's ``group`` completions with distinct scores.

    A prompt ends in a space and a completion holds ``completion_tokens - 1`` words: every
    trainer appends the EOS, so each sequence is ``prompt_tokens + completion_tokens`` tokens
    whether the trainer tokenises prompt and completion apart or together."""
    body = case.completion_tokens - 1

    def prompt(i: int) -> str:
        return words(case.prompt_tokens, i, vocab) + " "

    if case.method == "dpo":
        return [{"prompt": prompt(i), "chosen": words(body, 10_000 + i, vocab),
                 "rejected": words(body, 20_000 + i, vocab)} for i in range(examples)]
    if case.method in ("sft", "raft"):
        return [{"prompt": prompt(i), "completion": words(body, 10_000 + i, vocab)}
                for i in range(examples)]
    if case.method == "rrhf":
        return [{"prompt": prompt(i),
                 "completions": [words(body, 10_000 + case.group * i + j, vocab)
                                 for j in range(case.group)],
                 "scores": [float(j) for j in range(case.group)]} for i in range(examples)]
    raise ValueError(f"unknown method {case.method!r}")


class ArrowFrame:
    """The part of a polars ``DataFrame`` that ``training.train._build_trainer`` and
    ``datasets.Dataset.from_polars`` touch (``is_empty``, ``columns``, ``select``,
    ``to_arrow``), over a pyarrow table.

    Why: polars cannot travel to the GPU machine (its runtime is 54 MB), and the check must
    build each trainer with ``_build_trainer`` itself, so that it times what training runs."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> ArrowFrame:
        import pyarrow as pa

        return cls(pa.Table.from_pylist(rows))

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def is_empty(self) -> bool:
        return self.table.num_rows == 0

    def select(self, columns: Sequence[str]) -> ArrowFrame:
        return ArrowFrame(self.table.select(list(columns)))

    def to_arrow(self) -> Any:
        return self.table


def completion_rows(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """σ-RRHF groups as the training set's rows: one per completion, ``question_id`` the
    group's index (the frame ``_build_trainer`` checks for its columns)."""
    return [{"question_id": i, "prompt": g["prompt"], "completion": c, "score": s}
            for i, g in enumerate(groups) for c, s in zip(g["completions"], g["scores"],
                                                          strict=True)]


@contextlib.contextmanager
def given_groups(groups: list[dict[str, Any]]) -> Iterator[None]:
    """``training.train._rrhf_groups`` answers ``groups`` inside the block: it groups a polars
    frame with polars expressions, which the GPU machine cannot run. ``completion_rows`` of
    ``groups`` through the real function gives ``groups`` back
    (``tests/project/test_gpu_check.py``)."""
    from saturated_dag.training import train as tr

    original = tr._rrhf_groups
    tr._rrhf_groups = lambda _data: groups
    try:
        yield
    finally:
        tr._rrhf_groups = original


def build_trainer(method: str, model: Any, tokenizer: Any, rows: list[dict[str, Any]],
                  settings: Any, workdir: str, precision: str) -> Any:
    """The trainer training builds for ``method`` (``training.train._build_trainer``, called
    as is) on ``rows`` (``training_rows``' shape), without polars."""
    from saturated_dag.training import train as tr

    if method == "rrhf":
        with given_groups(rows):
            return tr._build_trainer(method, model, tokenizer,
                                     ArrowFrame.from_rows(completion_rows(rows)), settings,
                                     workdir, precision)
    return tr._build_trainer(method, model, tokenizer, ArrowFrame.from_rows(rows), settings,
                             workdir, precision)


def _step_clock(sync: Callable[[], None]) -> Any:
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        """Seconds and real (unpadded) tokens of each optimizer step, the device synchronised
        at both ends: a step is its micro-batches' forwards and backwards, DPO's reference
        pass, the optimizer and the scheduler."""

        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.tokens: list[int] = []
            self._start = 0.0
            self._tokens = 0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            sync()
            self._tokens = 0
            self._start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            sync()
            self.seconds.append(time.perf_counter() - self._start)
            self.tokens.append(self._tokens)

        def count(self, trainer: Any) -> None:
            """Adds each micro-batch's attention-mask tokens (before it reaches the device)."""
            step = trainer.training_step

            def counted(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
                mask = inputs.get("attention_mask")
                self._tokens += int(mask.sum() if mask is not None else inputs["input_ids"].numel())
                return step(model, inputs, *args, **kwargs)

            trainer.training_step = counted

    return StepClock()


def flops_per_token(method: str, checkpointing: bool, matmul: int) -> float:
    """Matmul FLOPs per training token as the cost table counts them
    (``paper_cost.training_flops_per_token``): forward 2N, backward to the activations 2N,
    the recomputed forward 2N under checkpointing, DPO's reference forward 2N."""
    return (6 if checkpointing else 4) * matmul + (2 * matmul if method == "dpo" else 0)


def measure_training(case: TrainCase, checkpointing: bool, base: Any, tokenizer: Any,
                     shapes: Shapes, device: str, workdir: Path, peak: float | None,
                     matmul: int) -> dict[str, Any]:
    """``shapes.warmup_steps`` untimed then ``shapes.timed_steps`` timed optimizer steps of a
    fresh trainer on a copy of the base model (as ``BaseModels`` gives each training)."""
    from transformers import PrinterCallback, ProgressCallback, set_seed

    from saturated_dag.training.config import (
        LORA_TARGET_MODULES,
        grad_accumulation,
        resolve_dtype,
    )

    sync = synchronizer(device)
    settings = trainer_settings(case, checkpointing)
    precision = resolve_dtype(settings.dtype)
    steps = shapes.warmup_steps + shapes.timed_steps
    model = copy.deepcopy(base)
    set_seed(settings.seed)
    rows = training_rows(case, steps * settings.batch_size, len(tokenizer))
    trainer = build_trainer(case.method, model, tokenizer, rows, settings,
                            str(workdir / f"{case.task}-{case.method}-{checkpointing}"),
                            precision)
    trainer.args.max_steps = steps
    for printer in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(printer)
    clock = _step_clock(sync)
    clock.count(trainer)
    trainer.add_callback(clock)
    with peak_memory(device) as memory:
        trainer.train()
    seconds = clock.seconds[shapes.warmup_steps:]
    tokens = clock.tokens[shapes.warmup_steps:]
    step_s, step_tokens = median(seconds), median(tokens)
    rate = step_tokens / step_s
    per_token = flops_per_token(case.method, checkpointing, matmul)
    # Batch sizes count completions (SFT, σ-RRHF) or pairs (DPO: two sequences each).
    sequences = settings.batch_size * (2 if case.method == "dpo" else 1)
    del trainer, model
    return {
        "task": case.task, "method": case.method, "checkpointing": checkpointing,
        "precision": precision, "batch_size": settings.batch_size,
        "per_device_batch_size": settings.per_device_batch_size,
        "grad_accumulation": grad_accumulation(settings), "lora_r": settings.lora_r,
        "lora_targets": list(LORA_TARGET_MODULES),
        "tokens_per_sequence": case.prompt_tokens + case.completion_tokens,
        "sequences_per_step": sequences, "tokens_per_step": step_tokens,
        "warmup_steps": shapes.warmup_steps, "step_seconds": seconds,
        "all_step_seconds": clock.seconds, "median_step_s": step_s, "tokens_per_s": rate,
        "flops_per_token": per_token, "achieved_flops": rate * per_token,
        "mfu": None if peak is None else rate * per_token / peak, **memory,
    }


# --------------------------------------------------------------------------------------------
# Sampling, entropy, loads


def measure_sampling(case: SamplingCase, model: Any, tokenizer: Any, shapes: Shapes,
                     device: str) -> list[dict[str, Any]]:
    """Generated tokens/s of the validation path (``TransformersBackend.sample``: the slot
    decoder) and of transformers' batched ``generate`` on the same rows; the warm-up is a
    short run of the same batch."""
    from benchmarks.bench_sampling import batched_generate
    from saturated_dag.generation.base import SamplingParams
    from saturated_dag.generation.transformers_backend import TransformersBackend

    sync = synchronizer(device)
    backend = TransformersBackend(model, copy.deepcopy(tokenizer), batch_size=case.slots)
    vocab = len(tokenizer)
    prompts = [words(case.prompt_tokens, 30_000 + i, vocab) for i in range(case.prompts)]
    params = SamplingParams(n=case.n, temperature=case.temperature, top_p=case.top_p,
                            max_new_tokens=case.max_new_tokens, seed=0)
    warm = replace(params, max_new_tokens=min(8, case.max_new_tokens))

    def decoder(p: SamplingParams) -> list[list[int]]:
        return [s.token_ids for group in backend.sample(prompts, p) for s in group]

    def generate(p: SamplingParams) -> list[list[int]]:
        return batched_generate(backend, prompts, p, case.slots)

    out = []
    for path, fn in (("decoder", decoder), ("generate", generate)):
        fn(warm)
        seconds, rows = timed(lambda fn=fn: fn(params), shapes.repeats, sync)
        generated = sum(len(r) for r in rows)
        out.append({"task": case.task, "path": path, "prompts": case.prompts, "n": case.n,
                    "slots": case.slots, "prompt_tokens": case.prompt_tokens,
                    "max_new_tokens": case.max_new_tokens, "generated_tokens": generated,
                    "seconds": seconds, "median_s": median(seconds),
                    "tokens_per_s": generated / median(seconds)})
    return out


def measure_entropy(case: EntropyCase, model: Any, shapes: Shapes, device: str
                    ) -> dict[str, Any]:
    """Tokens read per second by the teacher-forced entropy pass, one completion per call as
    the entropy scorer calls it (``teacher_forced_mean_entropy``)."""
    from saturated_dag.generation.entropy import teacher_forced_mean_entropy

    vocab = model.config.vocab_size
    pairs = [([1 + (i * 13 + k) % (vocab - 1) for k in range(case.prompt_tokens)],
              [1 + (i * 17 + k) % (vocab - 1) for k in range(case.completion_tokens)])
             for i in range(case.sequences)]
    tokens = sum(len(p) + len(c) for p, c in pairs)

    def run() -> list[float]:
        return [teacher_forced_mean_entropy(model, p, c, chunk=case.chunk) for p, c in pairs]

    seconds, _ = timed(run, shapes.repeats, synchronizer(device))
    return {"task": case.task, "sequences": case.sequences, "prompt_tokens": case.prompt_tokens,
            "completion_tokens": case.completion_tokens, "chunk": case.chunk,
            "tokens": tokens, "seconds": seconds, "median_s": median(seconds),
            "tokens_per_s": tokens / median(seconds)}


def measure_base_load(folder: Path, shapes: Shapes, device: str
                      ) -> tuple[dict[str, Any], Any, Any]:
    """Seconds of ``load_model`` (weights from disk to the device, the tokenizer) after one
    untimed load; returns the last model and tokenizer loaded, for the rest of the check. The
    files were just written, so they are read from the page cache: a first load from a cold
    disk is slower."""
    from saturated_dag.generation.models import load_model

    sync = synchronizer(device)
    loaded: list[Any] = [None]

    def load() -> tuple[Any, Any]:
        loaded[0] = None
        free(device)
        loaded[0] = load_model(str(folder), shapes.dtype, device)
        return loaded[0]

    seconds, (model, tokenizer) = timed(load, shapes.repeats, sync)
    return ({"seconds": seconds, "median_s": median(seconds),
             "weights_bytes": sum(f.stat().st_size for f in folder.glob("*.safetensors"))},
            model, tokenizer)


def measure_adapter(case: TrainCase, model: Any, tokenizer: Any, shapes: Shapes, device: str,
                    workdir: Path) -> dict[str, Any]:
    """One adapter of the profile's LoRA settings: its save as training saves an epoch
    (``save_pretrained``, with the tokenizer as the published folder has it) and its load into
    the base model as the transformers backend serves it (``merged_adapter``: read, merge,
    restore)."""
    from peft import get_peft_model

    from saturated_dag.generation.multi_lora import merged_adapter
    from saturated_dag.training import train as tr
    from saturated_dag.training.config import LORA_TARGET_MODULES

    sync = synchronizer(device)
    settings = trainer_settings(case, True)
    peft_model = get_peft_model(model, tr.lora_config(settings))
    folders = iter(workdir / f"adapter_{i}" for i in range(shapes.repeats + 1))
    last: list[Path] = []

    def save() -> None:
        folder = next(folders)
        peft_model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        last[:] = [folder]

    save_s, _ = timed(save, shapes.repeats, sync)
    base = peft_model.unload()
    adapter_bytes = sum(f.stat().st_size for f in last[0].iterdir() if f.is_file())

    def load() -> None:
        with merged_adapter(base, last[0]):
            pass

    load_s, _ = timed(load, shapes.repeats, sync)
    return {"lora_r": settings.lora_r, "lora_targets": list(LORA_TARGET_MODULES),
            "folder_bytes": adapter_bytes,
            "save": {"seconds": save_s, "median_s": median(save_s)},
            "load": {"seconds": load_s, "median_s": median(load_s),
                     "how": "saturated_dag.generation.multi_lora.merged_adapter"}}


# --------------------------------------------------------------------------------------------
# The run


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    import torch

    found["cuda"] = torch.version.cuda
    return found


def device_facts(device: str, peak_tflops: float | None) -> dict[str, Any]:
    """The device's name, memory and the BF16 peak its MFU is taken against."""
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        name = props.name
        facts: dict[str, Any] = {"type": "cuda", "name": name,
                                 "memory_bytes": props.total_memory,
                                 "capability": f"{props.major}.{props.minor}",
                                 "multiprocessors": props.multi_processor_count}
    else:
        name = platform.processor() or platform.machine()
        facts = {"type": "cpu", "name": f"CPU {name}", "cores": os.cpu_count(),
                 "torch_threads": torch.get_num_threads()}
    if peak_tflops is not None:
        facts.update(peak_bf16_flops=peak_tflops * 1e12, peak_basis="--peak-tflops")
    else:
        peak = next((v for chip, variant, v in PEAK_BF16_FLOPS
                     if facts["type"] == "cuda" and chip in name and variant in name), None)
        facts.update(peak_bf16_flops=peak, peak_basis=(
            "NVIDIA datasheet, dense BF16" if peak else "unknown: no MFU"))
    return facts


class Report:
    """The JSON, rewritten after every measurement: a run cut short keeps what it measured."""

    def __init__(self, path: Path | None, shapes: Shapes, device: dict[str, Any],
                 stand_ins: list[str]) -> None:
        self.path = path
        self.start = time.perf_counter()
        self.data: dict[str, Any] = {
            "schema": SCHEMA, "kind": KIND,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "device": device, "versions": versions(), "stand_ins": stand_ins,
            "shapes": shapes.to_json(), "model": {}, "loads": {}, "training": [],
            "sampling": [], "entropy": [], "skipped": [], "complete": False,
        }
        self.write()

    def write(self) -> None:
        self.data["wall_s"] = time.perf_counter() - self.start
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1))
            tmp.replace(self.path)


def say(message: str) -> None:
    print(f"[{datetime.now(UTC).strftime('%H:%M:%S')}] {message}", flush=True)


def run(shapes: Shapes, device: str, out: Path | None, workdir: Path,
        budget_s: float | None = None, peak_tflops: float | None = None,
        stand_ins: list[str] | None = None) -> dict[str, Any]:
    """Measure everything ``shapes`` names on ``device``; returns (and writes to ``out``) the
    report. A measurement that fails (out of memory, say) is recorded with its error and the
    rest go on; once ``budget_s`` has passed, the remaining ones are listed as skipped."""
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # trainers otherwise try a telemetry call
    torch.manual_seed(0)
    facts = device_facts(device, peak_tflops)
    report = Report(out, shapes, facts, stand_ins or [])
    say(f"device {facts['name']}; shapes {shapes.name}; versions {report.data['versions']}")

    def attempt(label: str, bucket: str | None, fn: Callable[[], Any]) -> Any:
        if budget_s is not None and time.perf_counter() - report.start > budget_s:
            report.data["skipped"].append(label)
            say(f"skipped (time budget): {label}")
            report.write()
            return None
        say(f"measuring {label}")
        try:
            result = fn()
        except Exception as err:  # recorded, and the check goes on
            result = {"label": label, "error": f"{type(err).__name__}: {err}"[:2000]}
            say(f"FAILED {label}: {result['error']}")
        finally:
            free(device)
        if bucket is not None:
            items = result if isinstance(result, list) else [result]
            report.data[bucket].extend(items)
            for item in items:
                if "tokens_per_s" in item:
                    path = f" ({item['path']})" if "path" in item else ""
                    say(f"  {label}{path}: {item['tokens_per_s']:,.1f} tokens/s"
                        + (f", MFU {item['mfu']:.1%}" if item.get("mfu") else "")
                        + (f", peak {item['peak_memory_bytes'] / 2**30:.1f} GiB"
                           if item.get("peak_memory_bytes") else ""))
        report.write()
        return result

    folder = build_model(shapes.model, shapes.dtype, workdir / "model", device)
    free(device)
    loaded = attempt("base model load", None, lambda: measure_base_load(
        folder, shapes, device))
    if loaded is None or "error" in loaded:
        report.data["loads"]["base_model"] = loaded
        report.write()
        return report.data
    report.data["loads"]["base_model"], model, tokenizer = loaded
    matmul = matmul_parameters(model)
    report.data["model"] = {"parameters": sum(p.numel() for p in model.parameters()),
                            "matmul_parameters": matmul, "dtype": shapes.dtype,
                            "weights": "random (seed 0)", "architecture": "Qwen3ForCausalLM"}
    peak = facts["peak_bf16_flops"]

    def training(checkpointing: bool) -> None:
        for case in shapes.training:
            attempt(f"training {case.task} {case.method} checkpointing "
                    f"{'on' if checkpointing else 'off'}", "training",
                    lambda case=case: measure_training(
                        case, checkpointing, model, tokenizer, shapes, device,
                        workdir / "trainers", peak, matmul))

    # What prices the table first (the first checkpointing setting is the profile's), so a
    # run cut short by its budget loses only the comparisons.
    training(shapes.checkpointing[0])
    for sampling in shapes.sampling:
        attempt(f"validation sampling {sampling.task}", "sampling",
                lambda s=sampling: measure_sampling(s, model, tokenizer, shapes, device))
    for entropy in shapes.entropy:
        attempt(f"teacher-forced entropy {entropy.task}", "entropy",
                lambda e=entropy: measure_entropy(e, model, shapes, device))
    for checkpointing in shapes.checkpointing[1:]:
        training(checkpointing)
    adapter = attempt("adapter save and load", None, lambda: measure_adapter(
        shapes.training[0], model, tokenizer, shapes, device, workdir / "adapters"))
    report.data["loads"]["adapter"] = adapter
    report.data["complete"] = not report.data["skipped"]
    report.write()
    say(f"done in {report.data['wall_s']:.0f} s"
        + (f"; skipped {len(report.data['skipped'])}" if report.data["skipped"] else ""))
    return report.data


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="paper",
                        help="paper (benchmarks/gpu_check_paper.json), toy, or a shapes JSON")
    parser.add_argument("--device", default=None, help="cuda (default where present) or cpu")
    parser.add_argument("--out", type=Path, help="the report's JSON")
    parser.add_argument("--workdir", type=Path,
                        help="scratch folder for the model and adapters (default: a temporary "
                             "folder, removed after)")
    parser.add_argument("--budget-s", type=float,
                        help="skip what would start after this many seconds")
    parser.add_argument("--peak-tflops", type=float,
                        help="the device's dense BF16 peak, where its name is not known here")
    parser.add_argument("--hide", default="",
                        help=f"comma-separated of {STAND_INS}: stand-ins even where installed "
                             "(the dry run's proof that the measured paths never use them)")
    parser.add_argument("--write-shapes", type=Path,
                        help="write the paper profile's shapes to this JSON and stop (here)")
    args = parser.parse_args(argv)
    if args.write_shapes:
        args.write_shapes.write_text(json.dumps(shapes_from_profile("paper").to_json(),
                                                indent=1) + "\n")
        return None
    hidden = install_stand_ins([h for h in args.hide.split(",") if h])
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shapes = load_shapes(args.shapes)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return run(shapes, device, args.out, args.workdir, args.budget_s, args.peak_tflops,
                   hidden)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        return run(shapes, device, args.out, Path(tmp), args.budget_s, args.peak_tflops, hidden)


if __name__ == "__main__":
    main()
