"""``<task>/<split>/adapter/<method>[_<scorer>]``: one LoRA adapter per cell of the matrix.

Training runs 1-4 epochs and keeps the epoch with the best validation pass@1 (App. B); the
per-epoch curve and, for DPO, the reward margins per step are in the metadata.
"""

from pathlib import Path

import dagster as dg
import pandas as pd

from assets._metadata import image
from resources import ExperimentResource, GenerationResource
from saturated_dag.config import Profile
from saturated_dag.evaluation import evaluate as run_eval
from saturated_dag.evaluation import summarise
from saturated_dag.experiments import Experiment
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.plots import training_curves
from saturated_dag.tasks import validation_questions
from saturated_dag.training.config import (
    DpoSettings,
    LoraSettings,
    RrhfSettings,
    SftSettings,
    TrainSettings,
)
from saturated_dag.training.train import train_adapter

CODE_VERSION = "1"


def adapter_dir(output_dir: str, task: str, exp: Experiment) -> Path:
    return Path(output_dir) / "adapters" / task / exp.split / exp.name


def method_settings(profile: Profile, method: str) -> TrainSettings:
    t = profile.training
    common = {"epochs": t.epochs, "batch_size": t.batch_size,
              "per_device_batch_size": t.per_device_batch_size,
              "learning_rate": t.learning_rate, "max_length": t.max_length, "seed": t.seed,
              "lora": LoraSettings(r=t.lora_r, alpha=t.lora_alpha, dropout=t.lora_dropout)}
    if method == "dpo":
        return DpoSettings(**common, beta=t.dpo_beta)
    if method == "rrhf":
        return RrhfSettings(**common, rank_weight=t.rrhf_rank_weight, use_sft=t.rrhf_use_sft,
                            hinge=t.rrhf_hinge, logistic_weight=t.rrhf_logistic_weight)
    return SftSettings(**common)


def _curve_markdown(epochs: list[dict]) -> str:
    lines = ["| epoch | step | validation pass@1 (%) |", "|---|---|---|"]
    for e in epochs:
        value = e.get("val_pass@1")
        lines.append(f"| {e['epoch']} | {e['step']} | "
                     f"{'' if value is None else f'{100 * value:.1f}'} |")
    return "\n".join(lines)


def _adapter_asset(task: str, exp: Experiment) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, exp.split, "adapter", exp.name], group_name=f"{task}_{exp.split}",
        code_version=CODE_VERSION, pool="gpu", kinds={"pytorch", "peft"},
        ins={"data": dg.AssetIn(key=[task, *exp.dataset])}, deps=["base_model"],
        description=f"LoRA adapter: {exp.method} on the {exp.split} split"
        + (f", ranked by {exp.scorer}" if exp.scorer else "") + ".",
    )
    def adapter(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                policy: GenerationResource, data: pd.DataFrame) -> dg.MaterializeResult:
        profile = experiment.settings
        settings = policy.settings()
        validation = validation_questions(profile, task)
        params = profile.sampling.params()

        def validation_pass_at_1(model, tokenizer) -> float:
            backend = TransformersBackend(model, tokenizer, batch_size=settings.batch_size,
                                          chat_template=settings.chat_template)
            table, _ = run_eval(validation, backend, params)
            return summarise(table, ks=(1,))["pass@1"] / 100

        out = adapter_dir(experiment.output_dir, task, exp)
        result = train_adapter(exp.method, settings.model, data,
                               method_settings(profile, exp.method), out,
                               eval_fn=validation_pass_at_1, log=context.log.info)
        margins = [h["rewards/margins"] for h in result.log_history if "rewards/margins" in h]
        losses = [h["loss"] for h in result.log_history if "loss" in h]
        metadata: dict[str, object] = {
            "adapter_dir": dg.MetadataValue.path(result.adapter_dir),
            "method": exp.method, "scorer": exp.scorer or "none", "split": exp.split,
            "training_rows": len(data), "best_epoch": result.best_epoch,
            "validation curve": dg.MetadataValue.md(_curve_markdown(result.epochs)),
            "final_train_loss": losses[-1] if losses else None,
        }
        if margins:
            metadata["dpo_reward_margins"] = dg.MetadataValue.json(
                {"step": list(range(1, len(margins) + 1)), "margin": margins})
        png = training_curves(result.epochs, margins, out.parent / f"{exp.name}_curves.png",
                              f"{task} {exp.split}: {exp.name}")
        metadata["training curves"] = image(png, "validation pass@1 and reward margins")
        return dg.MaterializeResult(metadata=metadata)

    return adapter


def adapter_assets(task: str, experiments: list[Experiment]) -> list[dg.AssetsDefinition]:
    return [_adapter_asset(task, exp) for exp in experiments]
