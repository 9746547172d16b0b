"""``<task>/eval/base`` and ``<task>/<split>/eval/<adapter>``: pass@1 and pass@k on the
held-out eval set (App. B.1), one row per question so a report can be recomputed.
"""

import dagster as dg
import pandas as pd

from assets._metadata import markdown_table
from assets.adapters import adapter_dir
from resources import ExperimentResource, GenerationResource
from saturated_dag.evaluation import adapter_backends, evaluate
from saturated_dag.experiments import Experiment
from saturated_dag.tasks import eval_questions

CODE_VERSION = "1"


def _report(context: dg.AssetExecutionContext, experiment: ExperimentResource, task: str,
            backend, label: str) -> dg.Output[pd.DataFrame]:
    profile = experiment.settings
    questions = eval_questions(profile, task)
    context.log.info(f"evaluating {label} on {len(questions)} {task} questions")
    table, summary = evaluate(questions, backend, profile.sampling.params(),
                              profile.verify_workers, log=context.log.info)
    by_cell = table.groupby("cell")["correct"].sum() / table.groupby("cell")["n"].sum()
    return dg.Output(table, metadata={
        **{k: float(v) for k, v in summary.items()},
        "samples_per_question": profile.sampling.n,
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
        return _report(context, experiment, task, policy.get_backend(context.log), "base model")

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
        # vLLM: a LoRA request on the already-loaded engine; transformers: merged weights
        base = policy.get_backend(context.log)
        backend = adapter_backends(base, {exp.name: folder}, base_model=settings.model,
                                   dtype=settings.dtype, device=settings.device)[exp.name]
        return _report(context, experiment, task, backend, f"{exp.split}/{exp.name}")

    return adapter_eval


def eval_report_assets(task: str, experiments: list[Experiment]) -> list[dg.AssetsDefinition]:
    return [_base_eval(task), *(_adapter_eval(task, exp) for exp in experiments)]

