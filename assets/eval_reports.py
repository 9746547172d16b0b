"""``<task>/eval/base`` and ``<task>/<split>/eval/<adapter>``: pass@1 and pass@k on the
held-out eval set (App. B.1). The stored report keeps every sample (question, cell, sample
index, gold, completion, extracted answer, verdict, token count, finish reason, mean entropy),
loadable with polars and ``datasets``, so every table is recomputed from it and any other
analysis needs no new sampling.

Eval replicates accumulate: a report evaluates ``evaluation.replicates`` replicates, never
fewer than its latest materialisation holds, and one more when the nightly schedule runs it
(run tag ``saturated_dag/nightly``), so each night adds a sampling seed and the tables'
intervals tighten. Earlier replicates are cache hits.

Sampled in resumable shards keyed by the eval questions, the sampling settings, the answer
check, the model's files, the adapter's files and this asset's code version
(``assets/_stages.py``): an unchanged re-run is a cache hit that loads no model.
"""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir, adapter_weights_version
from assets._metadata import frame_output, markdown_table
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import latest_metadata, schema_metadata
from saturated_dag.evaluation import (
    adapter_backends,
    evaluate_samples,
    per_question_results,
    summarise,
)
from saturated_dag.experiments import Experiment
from saturated_dag.generation.base import GenerationBackend
from saturated_dag.shards import questions_digest
from saturated_dag.tasks import eval_questions

EVAL_ASSET = {"io_manager_key": "parquet_io", "pool": "gpu", "kinds": {"polars", "parquet"},
              "metadata": schema_metadata("eval_report")}


NIGHTLY_TAG = "saturated_dag/nightly"
"""The nightly schedule's run tag (``jobs/nightly.py``): each such run adds one eval replicate."""


def _recorded_replicates(context: dg.AssetExecutionContext) -> int:
    """How many eval replicates this report's latest materialisation holds (0: none yet)."""
    metadata = latest_metadata(context.instance, context.asset_key)
    if metadata is None:
        return 0
    value = metadata.get("eval_replicates")
    return int(value.value) if value is not None else 1  # before replicates: one evaluation


def _replicates(context: dg.AssetExecutionContext, configured: int) -> int:
    """The profile's ``evaluation.replicates``, never fewer than the report already holds
    (replicates accumulate: earlier ones are cache hits), and one more in a nightly run."""
    recorded = _recorded_replicates(context)
    nightly = context.run.tags.get(NIGHTLY_TAG) == "true"
    count = max(configured, recorded + 1 if nightly else recorded)
    if count != configured:
        context.log.info(f"{count} eval replicates ({recorded} recorded"
                         f"{', one added by the nightly run' if nightly else ''}; the profile "
                         f"asks for {configured})")
    return count


def _report(context: dg.AssetExecutionContext, experiment: ExperimentResource,
            inference: InferenceResource, task: str,
            backend: Callable[[], GenerationBackend], label: str,
            adapter: Path | None = None) -> dg.Output[pl.DataFrame]:
    profile = experiment.settings
    questions = eval_questions(profile, task)
    context.log.info(f"evaluating {label} on {len(questions)} {task} questions")
    loaded: list[GenerationBackend] = []

    def backend_once() -> GenerationBackend:  # one engine for every replicate
        if not loaded:
            loaded.append(backend())
        return loaded[0]

    replicates = _replicates(context, profile.evaluation.replicates)
    parts = []
    fixed: dict[str, object] = {"policy": policy_identity(inference.policy_settings()),
                                "answer_check": profile.answer_check}
    if adapter is not None:
        fixed["adapter"] = adapter_weights_version(adapter)  # weights, not their timings
    inputs = {"questions": questions_digest(questions)}
    for replicate in range(replicates):
        # replicate r: the eval set sampled again with seed + r, in its own cached shards
        sampling = profile.sampling.model_copy(update={"seed": profile.sampling.seed + replicate})
        store, key = open_store(context, experiment,
                                {**fixed, "sampling": sampling.model_dump()}, inputs)
        with write_errors_reported():
            parts.append(evaluate_samples(
                questions, backend_once, sampling.params(), profile.verify_workers,
                log=context.log.info, store=store, shard_size=profile.stages.shard_questions,
                answer_check=profile.answer_check, replicate=replicate))
        cache = cache_metadata(context, key, store)
    samples = pl.concat(parts)
    table = per_question_results(samples)
    summary = summarise(table, ks=sorted({1, profile.sampling.n}))
    by_cell = (table.group_by("cell", maintain_order=True)
               .agg((pl.col("correct").sum() / pl.col("n").sum()).alias("pass@1"))
               .sort("cell"))
    return frame_output(samples, {
        **{k: float(v) for k, v in summary.items()},
        "samples": samples.height,
        "eval_replicates": replicates,
        "mean_tokens": float(samples["num_tokens"].mean() or 0.0),
        **cache,  # the last replicate's; each replicate's is in the log
        "samples_per_question": profile.sampling.n,
        "answer_check": profile.answer_check,
        "pass@1 by cell (%)": dg.MetadataValue.json(
            {str(cell): round(100 * float(value), 2) for cell, value in by_cell.iter_rows()}),
        "preview": markdown_table(table, max_rows=10),
        "samples preview": markdown_table(
            samples.select("question_id", "sample_index", "answer", "gold", "correct",
                           "num_tokens"), max_rows=10),
    })


def base_eval_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(key=[task, "eval", "base"], group_name=task, deps=["base_model"], **EVAL_ASSET,
              description=f"The base model on the {task} eval set.")
    def base_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                  inference: InferenceResource) -> dg.Output[pl.DataFrame]:
        return _report(context, experiment, inference, task,
                       lambda: inference.policy_backend(context.log), "base model")

    return base_eval


def adapter_eval_asset(task: str, exp: Experiment) -> dg.AssetsDefinition:
    @dg.asset(key=[task, exp.split, "eval", exp.name], group_name=f"{task}_{exp.split}",
              deps=[dg.AssetKey([task, exp.split, "adapter", exp.name])], **EVAL_ASSET,
              description=f"The {exp.name} adapter ({exp.split}) on the {task} eval set.")
    def adapter_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                     inference: InferenceResource) -> dg.Output[pl.DataFrame]:
        settings = inference.policy_settings()
        folder = adapter_dir(experiment.output_dir, task, exp)
        if not (folder / "adapter_config.json").is_file():
            raise dg.Failure(f"adapter {folder} is missing: materialise "
                             f"{task}/{exp.split}/adapter/{exp.name} first")

        def backend() -> GenerationBackend:
            # vLLM: a LoRA request on the already-loaded engine; transformers: merged weights
            base = inference.policy_backend(context.log)
            return adapter_backends(base, {exp.name: folder}, base_model=settings.model,
                                    dtype=settings.dtype, device=settings.device)[exp.name]

        return _report(context, experiment, inference, task, backend,
                       f"{exp.split}/{exp.name}", adapter=folder)

    return adapter_eval


def coverage_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """Advisory (WARN): a report missing questions is still readable, and the results table
    states its eval set; it does not block the tables downstream."""

    @dg.asset_check(asset=asset, name="eval_report_covers_every_question", blocking=False,
                    description="The report has exactly the eval set's question ids, each "
                    "with n distinct samples in every eval replicate, replicates 0.. without a "
                    "gap and at least the profile's (advisory: WARN).")
    def check(experiment: ExperimentResource, report: pl.DataFrame) -> dg.AssetCheckResult:
        profile = experiment.settings
        expected = {q.question_id for q in eval_questions(profile, task)}
        got = set(report["question_id"].cast(pl.String).to_list())
        n, replicates = profile.sampling.n, profile.evaluation.replicates
        keys = ["question_id", "replicate", "sample_index"]
        duplicated = report.height - report.select(keys).n_unique()
        per_question = report.group_by("question_id", "replicate").len()
        wrong_n = int((per_question["len"] != n).sum())
        found_replicates = report["replicate"].n_unique()  # nightly runs add replicates
        return dg.AssetCheckResult(
            passed=(got == expected and wrong_n == 0 and duplicated == 0
                    and found_replicates >= replicates
                    and sorted(report["replicate"].unique()) == list(range(found_replicates))
                    and per_question.height == len(got) * found_replicates),
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"expected_questions": len(expected), "reported_questions": len(got),
                      "missing": len(expected - got), "unexpected": len(got - expected),
                      "duplicated": duplicated, "questions_without_n_samples": wrong_n,
                      "expected_n": n, "replicates": found_replicates,
                      "profile_replicates": replicates})

    return check
