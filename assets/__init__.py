"""Dagster assets: one file per box of the pipeline, each a thin layer over saturated_dag.

``profile_assets(profile)`` builds the graph of the profile's own tasks only: a task the
profile does not run has no assets (they could never materialise), so the graph shows what
the profile runs.
"""

import dagster as dg

from assets._draws import data_partitions, partitioned_by_draw
from assets._keys import with_key_prefix
from assets.adapters import RecipeSource, adapter_assets, adapter_checks
from assets.automation import with_lineage
from assets.base_model import base_model
from assets.behaviour import behaviour_asset
from assets.budget import budget_asset
from assets.difficulty_partitions import difficulty_partitions_asset, difficulty_partitions_check
from assets.dpo_search import base_validation_asset, dpo_search_asset
from assets.eval_reports import adapter_eval_asset, base_eval_asset, coverage_check
from assets.generation_pool import generation_pool_asset, generation_pool_check
from assets.preference_datasets import preference_dataset_assets, preference_dataset_checks
from assets.quality_scores import finite_scores_check, score_assets
from assets.result_tables import results_table_asset, sweep_table_asset
from assets.runs_table import runs_table_asset
from assets.scorer_agreement import scorer_agreement_asset
from assets.selection import selection_asset, selection_key
from assets.testbed import testbed_asset
from saturated_dag.config import Profile
from saturated_dag.experiments import TaskPlan, experiment_plan
from saturated_dag.scorers.builtin import task_scorers


def recipe_sources(plan: TaskPlan) -> dict:
    """Each ``recipe_from`` cell's recipe cell and that cell's selection asset (None when the
    recipe cell has one configuration)."""
    return {cell: RecipeSource(source, selection_key(plan.task, source)
                               if source in plan.selections else None)
            for cell, source in plan.recipe_cells.items()}


def task_assets(plan: TaskPlan
                ) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every asset of one task (pool to tables) and the checks beside them, as the task's
    plan (``saturated_dag.experiments.TaskPlan``) lays them out: the factories read the plan's
    resolved specs, nothing else of the profile."""
    task, trained, partitions = plan.task, plan.trained, plan.partitions
    pool = generation_pool_asset(task)
    parts = difficulty_partitions_asset(task)
    scorers = task_scorers(plan.scorer_names, task)
    scores = score_assets(task, scorers, judge_is_model=plan.judge_is_model)
    selections = [selection_asset(task, cell, trained[cell]) for cell in plan.selections]
    scorer_assets = {spec.name: spec.asset_name for spec in scorers}
    datasets = preference_dataset_assets(task, list(plan.cells), scorer_assets)
    evals = [base_eval_asset(task),
             *(adapter_eval_asset(task, cell, trained[cell]) for cell in plan.cells)]
    testbed = plan.testbed
    controls_run = testbed is not None and testbed.analysis == "controls"
    tables = [results_table_asset(task, list(plan.main), testbed=controls_run),
              behaviour_asset(task, list(plan.main)),
              *(sweep_table_asset(task, sweep, rows, plan.sweep_configurations[sweep])
                for sweep, rows in plan.sweeps.items()),
              runs_table_asset(task, list(plan.cells), trained)]
    budgeted = [cell for cell in plan.main if cell in plan.selections]
    if budgeted:
        tables.append(budget_asset(task, budgeted))
    draws = data_partitions(plan.data_seeds)  # one partition per data seed, or none for one
    pool, parts, agreement, *score_list = partitioned_by_draw(
        [pool, parts, scorer_agreement_asset(task, scorer_assets), *scores.values()], draws)
    scores = dict(zip(scores, score_list, strict=True))
    datasets = partitioned_by_draw(datasets, draws)
    built = [pool, parts, *scores.values(), agreement, *datasets,
             *adapter_assets(task, partitions, check_in_step=plan.checks_in_step,
                             sources=recipe_sources(plan), by_draw=draws is not None),
             *selections, *evals, *tables]
    if testbed is not None:
        if testbed.analysis == "dpo_recipe_search":
            built += [base_validation_asset(task),
                      dpo_search_asset(plan, testbed.split, by_draw=draws is not None)]
        else:
            built.append(testbed_asset(plan, testbed.split, by_draw=draws is not None))
    checks = [generation_pool_check(task, pool), difficulty_partitions_check(parts),
              *(finite_scores_check(task, asset) for asset in scores.values()),
              *preference_dataset_checks(datasets),
              *([] if plan.checks_in_step else adapter_checks(task, partitions)),
              *(coverage_check(task, asset) for asset in evals)]
    return built, checks


def profile_assets(profile: Profile
                   ) -> tuple[list[dg.AssetsDefinition | dg.SourceAsset],
                              list[dg.AssetChecksDefinition]]:
    """The base model and every asset of the profile's tasks, with their checks.

    The assets carry their derived code versions and automation conditions (``with_lineage``),
    so every caller (definitions, tests, benchmarks) runs the same versioned graph, and their
    keys start with the profile's ``key_prefix`` (``assets/_keys.py``).
    """
    built: list = [base_model]
    checks: list[dg.AssetChecksDefinition] = []
    for plan in experiment_plan(profile).values():
        task_built, task_checks = task_assets(plan)
        built += task_built
        checks += task_checks
    return with_key_prefix(profile, with_lineage(built, profile), checks)


__all__ = ["profile_assets", "task_assets"]
