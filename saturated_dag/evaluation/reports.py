"""Eval reports (App. B.1): n samples per question, pass@1 and pass@k by the unbiased
estimator, answers checked with Math-Verify (the profile's ``answer_check``). A report keeps
every sample (``evaluate_samples``: completion, extracted answer, verdict, token count, mean
entropy), so any table can be recomputed or re-analysed without sampling again; the
per-question counts the tables use are ``per_question_results`` of it.

Each row also says what was evaluated (``ReportIdentity``: adapter, method, scorer, split and
base model), so a report's Parquet file read alone names its model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from saturated_dag.data.pool import (
    BackendSource,
    generate_pool,
    progress_logger,
    resolve_backend,
    verified_frame,
)
from saturated_dag.evaluation.metrics import pass_at_k
from saturated_dag.generation.base import GenerationBackend, SampleRequest, SamplingParams
from saturated_dag.infra.log import LogFn
from saturated_dag.infra.shards import ShardStore, shard_seed
from saturated_dag.schemas import schema
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.verification import AnswerCheck


@dataclass(frozen=True)
class ReportIdentity:
    """What an eval report evaluated, repeated on each of its rows (the ``eval_report``
    schema's first columns).

    ``base_model`` is the policy as the profile names it (a hub id, a path or a packaged
    name); the rest name the adapter (``adapter``: its name, one per training seed) and how
    it was trained. The base model's own report has no adapter: ``adapter``, ``method``,
    ``scorer`` and ``split`` are null there (null, not ``"base"``, so no adapter name can be
    mistaken for it and ``adapter.is_null()`` selects it); ``scorer`` is also null for an
    adapter trained without a quality ranking (SFT)."""

    base_model: str | None = None
    adapter: str | None = None
    method: str | None = None
    scorer: str | None = None
    split: str | None = None

    def columns(self) -> dict[str, pl.Expr]:
        """The identity as string columns, null where unset."""
        return {name: pl.lit(getattr(self, name), pl.String) for name in IDENTITY_COLUMNS}


IDENTITY_COLUMNS = ("adapter", "method", "scorer", "split", "base_model")
"""``ReportIdentity``'s columns, in the ``eval_report`` schema's order."""


def per_question_results(completions: pl.DataFrame) -> pl.DataFrame:
    """(question_id, cell, [data_seed,] [training_replicate,] [replicate,] n, correct) from
    one row per sampled completion.

    One row per question (and data seed, training and eval replicate, when the completions
    have those columns: a report written before data seeds has no ``data_seed``, and the
    statistics read it as data seed 0), sorted by its keys (a null key last), ``n`` the
    non-null verdicts and ``correct`` the true ones, both Int64: the order and counts of the
    pandas version, whose eval reports stay comparable.
    """
    if completions.is_empty():
        raise ValueError("no completions to evaluate")
    keys = [c for c in ("question_id", "cell", "data_seed", "training_replicate", "replicate")
            if c in completions.columns]
    verdict = pl.col("correct")
    return (completions.group_by(keys)
            .agg(n=verdict.count().cast(pl.Int64), correct=verdict.sum().cast(pl.Int64))
            .sort(keys, nulls_last=True, maintain_order=True))


def summarise(per_question: pl.DataFrame, ks: Sequence[int] = (1, 8)) -> dict[str, float]:
    """Mean pass@k over questions (in %), from per-question (n, correct) counts.

    With eval or training replicates or data seeds (``replicate``, ``training_replicate``,
    ``data_seed`` columns, each replicate covering the same questions) it is the mean over
    replicates of the mean over questions, and it counts them (``replicates``,
    ``training_replicates``: every adapter of the row, ``data_seeds``)."""
    if per_question.is_empty():
        raise ValueError("no questions to summarise")
    summary: dict[str, float] = {"questions": float(per_question["question_id"].n_unique())}
    if "replicate" in per_question.columns:
        summary["replicates"] = float(per_question["replicate"].n_unique())
    if "training_replicate" in per_question.columns:
        summary["training_replicates"] = float(per_question["training_replicate"].n_unique())
    if "data_seed" in per_question.columns:
        summary["data_seeds"] = float(per_question["data_seed"].fill_null(0).n_unique())
    for k in ks:
        values = [pass_at_k(int(n), int(c), k) for n, c in
                  zip(per_question["n"], per_question["correct"], strict=True) if n >= k]
        if len(values) != len(per_question):
            raise ValueError(f"pass@{k} needs at least {k} samples for every question")
        summary[f"pass@{k}"] = 100.0 * sum(values) / len(values)
    return summary


def evaluate_samples(
    questions: Sequence[Question],
    backend: BackendSource,
    params: SamplingParams,
    verify_workers: int = 1,
    log: LogFn | None = None,
    store: ShardStore | None = None,
    shard_size: int | None = None,
    answer_check: AnswerCheck = "math_verify",
    replicate: int = 0,
    training_replicate: int = 0,
    identity: ReportIdentity | None = None,
    data_seed: int = 0,
) -> pl.DataFrame:
    """Sample and verify ``questions``: the eval report, one row per sample (its declared
    ``eval_report`` schema), in question then sample order, labelled ``replicate`` (eval seed),
    ``training_replicate`` (the adapter's index among its row's adapters, data seed major; 0
    for the base model) and ``data_seed`` (the draw of training data the adapter was trained
    on; 0 for the base model, which no data trained), and with ``identity`` (what was
    evaluated; all null when not given). The statistics resample data seeds, then each one's
    training seeds (``statistics.seed_matrix``).

    ``answer_check`` is the profile's rule for reading answers; with ``store`` and
    ``shard_size`` the completions are sampled in resumable, cached shards (the identity is
    added after: it is not part of a shard, so labelling a report never re-samples it)."""
    completions = generate_pool(questions, backend, params, verify_workers, log,
                                store=store, shard_size=shard_size, answer_check=answer_check)
    if completions.is_empty():
        raise ValueError("no completions to evaluate")
    return completions.with_columns(
        replicate=pl.lit(replicate, pl.Int64),
        training_replicate=pl.lit(training_replicate, pl.Int64),
        data_seed=pl.lit(data_seed, pl.Int64),
        **(identity or ReportIdentity()).columns()).select(list(schema("eval_report")))


@dataclass(frozen=True)
class ReportShards:
    """One eval report part to sample: its shard store, its sampling settings (the eval
    replicate's seed) and its LoRA adapter folder (None: the base model)."""

    store: ShardStore
    params: SamplingParams
    adapter: Path | None = None


def sample_shards_together(
    questions: Sequence[Question],
    reports: Sequence[ReportShards],
    backend: BackendSource,
    shard_size: int | None,
    verify_workers: int = 1,
    log: LogFn | None = None,
    answer_check: AnswerCheck = "math_verify",
    per_pass: int = 8,
) -> dict[str, int]:
    """Sample every report's missing shards, up to ``per_pass`` reports' shard ``i`` in one batched
    pass (``backend.sample_many``: the base model and LoRA adapters side by side), each shard
    verified and written to its own report's store. Returns the shards sampled per store folder.

    Why: the eval reports of many adapters (training replicates, eval replicates) then cost
    one decoding pass instead of one pass and one model load each. Each shard equals what
    ``generate_pool`` would sample for its report alone (same shard seed, per-row seeds), so
    ``evaluate_samples`` afterwards finds it stored and a resumed or partly batched run gives
    the same report (``tests/evaluation/test_eval_batching.py``).
    """
    say = log or (lambda _msg: None)
    unique = list({str(report.store.root): report for report in reports}.values())
    sampled = {str(report.store.root): 0 for report in unique}
    if not questions or not unique:
        return sampled
    plans = [report.store.prepare(len(questions), shard_size, say) for report in unique]
    plan = plans[0]  # every store records the same plan
    loaded: list[GenerationBackend] = []
    for index, span in enumerate(plan):
        missing = [report for report in unique if not report.store.has(index, say)]
        if not missing:
            continue
        if not loaded:
            loaded.append(resolve_backend(backend))
        model = loaded[0]
        part = [questions[i] for i in span]
        prompts = [model.render(q.prompt_text) for q in part]  # once per shard, every group
        for start in range(0, len(missing), per_pass):
            group = missing[start : start + per_pass]
            requests = [SampleRequest(prompts, replace(report.params, seed=shard_seed(
                report.params.seed, index)), report.adapter) for report in group]
            adapters = sum(report.adapter is not None for report in group)
            say(f"shard {index + 1}/{len(plan)}: {len(part)} questions x n for {len(group)} "
                f"model(s) ({adapters} adapter(s)) in one batched pass on {model.name}")
            results = model.sample_many(requests, progress=progress_logger(say))
            for report, request, samples in zip(group, requests, results, strict=True):
                report.store.save(index, verified_frame(part, prompts, samples, request.params,
                                                     verify_workers, say, answer_check))
                sampled[str(report.store.root)] += 1
    return sampled


def evaluate(questions: Sequence[Question], backend: BackendSource, params: SamplingParams,
             **options: Any) -> tuple[pl.DataFrame, dict[str, float]]:
    """Sample and score ``questions``: (per-question results, summary).

    ``options`` are ``evaluate_samples``' (``verify_workers``, ``log``, ``store``,
    ``shard_size``, ``answer_check``: the profile's rule for reading answers, the paper's
    Math-Verify extraction by default; a store's key must include it). With ``store`` and
    ``shard_size`` the completions are sampled in resumable, cached shards
    (``generate_pool``); ``backend`` may then be a loader called only if a shard is missing.
    """
    table = per_question_results(evaluate_samples(questions, backend, params, **options))
    return table, summarise(table, ks=sorted({1, params.n}))


def recorded_base_model(adapter_dir: str | Path) -> str:
    """The base model an adapter folder names (``adapter_config.json``'s
    ``base_model_name_or_path``, read by PEFT), as a spec ``generation.models.resolve``
    loads: a hub id, a path relative to the project (resolved against the project root from
    any working folder), a packaged short name, or an absolute path."""
    from peft import PeftConfig

    name = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
    if not name:
        raise ValueError(f"adapter {adapter_dir} names no base model "
                         "(adapter_config.json has no base_model_name_or_path)")
    return name


def adapter_backend(
    base_model: str | None,
    adapter_dir: str,
    batch_size: int = 64,
    chat_template: str = "auto",
    dtype: str = "float32",
    device: str = "cpu",
    enable_thinking: bool | None = None,
) -> GenerationBackend:
    """The base model with a LoRA adapter merged in, on the transformers backend.

    ``base_model`` None: the one the adapter's folder names (``recorded_base_model``), so a
    copied adapter folder loads with nothing but itself. ``chat_template`` and
    ``enable_thinking`` are the base backend's: an adapter is evaluated on exactly the prompts
    the base model saw."""
    from peft import PeftModel

    from saturated_dag.generation.models import load_model
    from saturated_dag.generation.transformers_backend import TransformersBackend

    spec = recorded_base_model(adapter_dir) if base_model is None else base_model
    model, tokenizer = load_model(spec, dtype, device)
    merged = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
    merged.eval()
    backend = TransformersBackend(merged, tokenizer, batch_size=batch_size,
                                  chat_template=chat_template)  # type: ignore[arg-type]
    backend.enable_thinking = enable_thinking
    return backend


def adapter_backends(
    base_backend: GenerationBackend,
    adapter_dirs: Mapping[str, str | Path] | Sequence[str | Path],
    base_model: str | None = None,
    dtype: str = "float32",
    device: str = "cpu",
) -> dict[str, GenerationBackend]:
    """One backend per adapter, keyed by name (the folder path for a plain sequence).

    On a ``VllmBackend`` started with ``enable_lora=True`` these are LoRA views of its one
    engine (the base model is not loaded again; closing a view frees nothing). Their LoRA
    name is the folder, not the caller's key: keys repeat across calls (every split has an
    ``sft`` adapter) and vLLM tells adapters apart by name. On a
    ``TransformersBackend`` each is ``adapter_backend``: ``base_model`` loaded again with the
    adapter merged in (close each when done); ``base_backend`` keeps the base model.
    """
    named = (dict(adapter_dirs) if isinstance(adapter_dirs, Mapping)
             else {str(d): d for d in adapter_dirs})
    from saturated_dag.generation.transformers_backend import TransformersBackend
    from saturated_dag.generation.vllm_backend import VllmBackend  # imports no vLLM

    if isinstance(base_backend, VllmBackend):
        return {name: base_backend.with_adapter(folder) for name, folder in named.items()}
    if isinstance(base_backend, TransformersBackend):
        if base_model is None:
            raise ValueError("merging adapters on transformers needs base_model (the model spec)")
        return {name: adapter_backend(base_model, str(folder), base_backend.batch_size,
                                      base_backend.chat_template, dtype, device,
                                      base_backend.enable_thinking)
                for name, folder in named.items()}
    raise TypeError(f"no adapter support for the {type(base_backend).__name__} backend")
