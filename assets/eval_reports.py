"""``<task>/eval/base`` and ``<task>/<split>/eval/<adapter>``: pass@1 and pass@k on the
held-out eval set (App. B.1), one row per question so a report can be recomputed.

Sampled in resumable shards keyed by the eval questions, the sampling settings, the answer
check, the model's files and the adapter's files (``assets/_stages.py``): an unchanged re-run
is a cache hit that loads no model.
"""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pandas as pd

from assets._metadata import markdown_table
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from assets.adapters import adapter_dir
from resources import ExperimentResource, GenerationResource
from saturated_dag.evaluation import adapter_backends, evaluate
from saturated_dag.experiments import Experiment
from saturated_dag.generation.base import GenerationBackend
from saturated_dag.shards import file_fingerprint, questions_digest
from saturated_dag.tasks import eval_questions

CODE_VERSION = "3"  # 2: sampled in cached shards, each with its own seed; 3: answer_check


def _report(context: dg.AssetExecutionContext, experiment: ExperimentResource,
            policy: GenerationResource, task: str, backend: Callable[[], GenerationBackend],
            label: str, adapter: Path | None = None) -> dg.Output[pd.DataFrame]:
    profile = experiment.settings
    questions = eval_questions(profile, task)
    context.log.info(f"evaluating {label} on {len(questions)} {task} questions")
    stage = "/".join(context.asset_key.path)
    config: dict[str, object] = {"policy": policy_identity(policy.settings()),
                                 "sampling": profile.sampling.model_dump(),
                                 "answer_check": profile.answer_check}
    if adapter is not None:
        config["adapter"] = file_fingerprint(adapter)
    store, key = open_store(experiment, stage, CODE_VERSION, config,
                            {"questions": questions_digest(questions)})
    with write_errors_reported():
        table, summary = evaluate(questions, backend, profile.sampling.params(),
                                  profile.verify_workers, log=context.log.info, store=store,
                                  shard_size=profile.stages.shard_questions,
                                  answer_check=profile.answer_check)
    by_cell = table.groupby("cell")["correct"].sum() / table.groupby("cell")["n"].sum()
    return dg.Output(table, metadata={
        **{k: float(v) for k, v in summary.items()},
        **cache_metadata(context, stage, key, store),
        "samples_per_question": profile.sampling.n,
        "answer_check": profile.answer_check,
        "pass@1 by cell (%)": dg.MetadataValue.json(
            {str(k): round(100 * float(v), 2) for k, v in by_cell.items()}),
        "preview": markdown_table(table, max_rows=10),
    })


def _base_eval(task: str) -> dg.AssetsDefinition:
    @dg.asset(key=[task, "eval", "base"], group_name=task, io_manager_key="parquet_io",
              code_version=CODE_VERSION, pool="gpu", deps=["base_model"], kinds={"parquet"},
              description=f"The base model on the {task} eval set.")
    def base_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                  policy: GenerationResource) -> dg.Output[pd.DataFrame]:
        return _report(context, experiment, policy, task,
                       lambda: policy.get_backend(context.log), "base model")

    return base_eval


def _adapter_eval(task: str, exp: Experiment) -> dg.AssetsDefinition:
    @dg.asset(key=[task, exp.split, "eval", exp.name], group_name=f"{task}_{exp.split}",
              io_manager_key="parquet_io", code_version=CODE_VERSION, pool="gpu",
              deps=[dg.AssetKey([task, exp.split, "adapter", exp.name])], kinds={"parquet"},
              description=f"The {exp.name} adapter ({exp.split}) on the {task} eval set.")
    def adapter_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                     policy: GenerationResource) -> dg.Output[pd.DataFrame]:
        settings = policy.settings()
        folder = adapter_dir(experiment.output_dir, task, exp)
        if not (folder / "adapter_config.json").is_file():
            raise dg.Failure(f"adapter {folder} is missing: materialise "
                             f"{task}/{exp.split}/adapter/{exp.name} first")

        def backend() -> GenerationBackend:
            # vLLM: a LoRA request on the already-loaded engine; transformers: merged weights
            base = policy.get_backend(context.log)
            return adapter_backends(base, {exp.name: folder}, base_model=settings.model,
                                    dtype=settings.dtype, device=settings.device)[exp.name]

        return _report(context, experiment, policy, task, backend, f"{exp.split}/{exp.name}",
                       adapter=folder)

    return adapter_eval


def _coverage_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="eval_report_covers_every_question", blocking=False,
                    description="The per-question table has exactly the eval set's question "
                    "ids, each with n samples.")
    def check(experiment: ExperimentResource, report: pd.DataFrame) -> dg.AssetCheckResult:
        profile = experiment.settings
        expected = {q.question_id for q in eval_questions(profile, task)}
        got = set(report["question_id"].astype(str))
        n = profile.sampling.n
        wrong_n = int((report["n"] != n).sum())
        duplicated = int(report["question_id"].duplicated().sum())
        return dg.AssetCheckResult(
            passed=got == expected and wrong_n == 0 and duplicated == 0,
            metadata={"expected_questions": len(expected), "reported_questions": len(got),
                      "missing": len(expected - got), "unexpected": len(got - expected),
                      "duplicated": duplicated, "questions_without_n_samples": wrong_n,
                      "expected_n": n})

    return check


def eval_report_assets(task: str, experiments: list[Experiment]) -> list[dg.AssetsDefinition]:
    return [_base_eval(task), *(_adapter_eval(task, exp) for exp in experiments)]


def eval_report_checks(assets: list[dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    """One coverage check per eval report asset (the lead wires these into Definitions)."""
    return [_coverage_check(a.key.path[0], a) for a in assets]
