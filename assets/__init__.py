"""Dagster assets: one file per box of the pipeline, each a thin layer over saturated_dag."""

import dagster as dg

from assets.adapters import adapter_assets, adapter_checks
from assets.base_model import base_model
from assets.difficulty_partitions import difficulty_partitions_assets, difficulty_partitions_checks
from assets.eval_reports import eval_report_assets, eval_report_checks
from assets.generation_pool import generation_pool_assets, generation_pool_checks
from assets.preference_datasets import preference_dataset_assets, preference_dataset_checks
from assets.quality_scores import quality_score_assets, quality_score_checks
from assets.result_tables import results_table_asset, sweep_table_asset
from assets.scorer_agreement import scorer_agreement_assets
from saturated_dag.config import Profile
from saturated_dag.experiments import (
    Experiment,
    SweepRow,
    experiment_matrix,
    main_matrix,
    sweeps,
)
from saturated_dag.tasks import TASKS, has_strict_pool

ALL_ASSETS = [base_model, *generation_pool_assets, *difficulty_partitions_assets,
              *quality_score_assets, *scorer_agreement_assets]
ALL_ASSET_CHECKS = [*generation_pool_checks, *difficulty_partitions_checks,
                    *quality_score_checks]


def experiment_assets(profile: Profile) -> list[dg.AssetsDefinition]:
    """Datasets, adapters, eval reports, result tables and sweep tables of the profile.

    The matrix (split x method x scorer, plus the sweeps) comes from the profile, so the asset
    graph shows exactly the experiments it runs, and one cell, a row or all can be
    materialised.
    """
    built: list[dg.AssetsDefinition] = []
    for task in TASKS:
        cells = task_cells(profile, task)
        built += preference_dataset_assets(task, cells)
        built += adapter_assets(task, cells)
        built += eval_report_assets(task, cells)
        main = [c for c in main_matrix(profile.training) if _trainable(profile, task, c.split)]
        built.append(results_table_asset(task, main))
        for sweep, rows in task_sweeps(profile, task).items():
            built.append(sweep_table_asset(task, sweep, rows))
    return built


def _trainable(profile: Profile, task: str, split: str) -> bool:
    return split != "strict_saturated" or has_strict_pool(profile, task)


def task_cells(profile: Profile, task: str) -> list[Experiment]:
    """The matrix cells a task can train: GSM8K has no strictly easier pool D'."""
    return [c for c in experiment_matrix(profile.training) if _trainable(profile, task, c.split)]


def task_sweeps(profile: Profile, task: str) -> dict[str, list[SweepRow]]:
    return {name: rows for name, rows in sweeps(profile.training).items()
            if _trainable(profile, task, rows[0].experiment.split)}


def experiment_checks(profile: Profile) -> list[dg.AssetChecksDefinition]:
    """Checks beside the experiment assets: DPO pairs differ, adapters load and generate,
    eval reports cover every question."""
    checks: list[dg.AssetChecksDefinition] = []
    for task in TASKS:
        cells = task_cells(profile, task)
        checks += preference_dataset_checks(preference_dataset_assets(task, cells))
        checks += adapter_checks(task, cells)
        checks += eval_report_checks(eval_report_assets(task, cells))
    return checks


__all__ = ["ALL_ASSETS", "ALL_ASSET_CHECKS", "experiment_assets", "experiment_checks"]
