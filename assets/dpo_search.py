"""``chain_sum/validation/base`` and ``chain_sum/dpo_recipe_search``: DPO's recipe search.

``docs/testbed.md`` ("DPO's recipe search") says what it answers. The profile ``dpo_search``
(``testbed.analysis: dpo_recipe_search``) trains DPO on the oracle and on its shuffled scores,
each cell over all its configurations, as ordinary cells of the plan. This module adds:

- the base model's validation results (``chain_sum/validation/base``): the reference every
  recipe's validation pass@1 is read against (the same questions, prompts, sampling and answer
  rule as each training's validation, ``training/runner.py``);
- the analysis, which reads the two cells' selections (every configuration and the rule's
  choice) and each configuration's adapters' own files (training log, kept epoch, validation
  results and completions), so editing it re-runs no training.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir
from assets._metadata import frame_output, frame_table, image, output_file, summary_entry
from assets._priority import POLICY_ENGINE, priority
from assets.selection import selection_key
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis import dpo_search
from saturated_dag.config import TrainingSettings
from saturated_dag.data.questions import validation_questions
from saturated_dag.evaluation.reports import evaluate_samples, per_question_results, summarise
from saturated_dag.experiments import Cell, TaskPlan
from saturated_dag.infra.atomic import atomic_write_text, read_proven_parquet
from saturated_dag.training.folders import RESULT_FILE, VALIDATION_FILE, VALIDATION_SAMPLES_FILE
from saturated_dag.training.selection import chosen

SEARCH_KEY = ["chain_sum", "dpo_recipe_search"]
BASE_VALIDATION_KEY = ["chain_sum", "validation", "base"]
POSITIVE, NEGATIVE = "oracle", "oracle_shuffled"


def base_validation_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(key=[task, "validation", "base"], group_name="testbed", deps=["base_model"],
              io_manager_key="parquet_io", pool="gpu", kinds={"polars", "parquet"},
              metadata=schema_metadata("validation_samples"), op_tags=priority(POLICY_ENGINE),
              description=f"The base model on the {task} validation questions: one row per "
              "sample, sampled and checked as every training's validation is (the reference "
              "of the DPO recipe search's Δ).")
    def base_validation(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                        inference: InferenceResource) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        questions = validation_questions(profile, task)
        context.log.info(f"the base model on {len(questions)} validation questions")
        samples = evaluate_samples(questions, lambda: inference.policy_backend(context.log),
                                   profile.sampling.params(), profile.verify_workers,
                                   log=context.log.info, answer_check=profile.answer_check)
        pass1 = summarise(per_question_results(samples), ks=(1,))["pass@1"]
        return frame_output(samples.select("question_id", "sample_index", "completion",
                                           "correct"), {
            "summary": summary_entry(f"**The base model's validation pass@1: {pass1:.2f}%** "
                                     f"({len(questions)} questions, n = "
                                     f"{profile.sampling.n})."),
            "validation pass@1": pass1})

    return base_validation


def search_cells(plan: TaskPlan, split: str) -> dict[str, Cell]:
    """The search's two cells: DPO ranked by the oracle and by its shuffle, on ``split``."""
    found = {c.scorer: c for c in plan.main
             if c.split == split and c.method == "dpo" and c.scorer in (POSITIVE, NEGATIVE)}
    missing = [s for s in (POSITIVE, NEGATIVE) if s not in found]
    if missing:
        raise ValueError(f"testbed.analysis dpo_recipe_search: the {split} split has no DPO "
                         f"cell ranked by {', '.join(missing)}; list them in "
                         "training.method_scorers.dpo")
    not_selected = [c.name for c in found.values() if c not in plan.selections]
    if not_selected:
        raise ValueError(f"testbed.analysis dpo_recipe_search: {', '.join(not_selected)} "
                         "trains one configuration; the search needs several "
                         "(training.selection) and no training.recipes")
    return found


def _runs(output_dir: str, plan: TaskPlan, cell: Cell, training: TrainingSettings
          ) -> list[dpo_search.SearchRun]:
    """Every adapter of ``cell`` as the analysis reads it, from its own folder."""
    runs = []
    for config, seeds in plan.trained[cell].items():
        effective = config.training(training)
        recipe = (effective.dpo_beta, effective.dpo_nll_weight, effective.learning_rate)
        for seeded in seeds:
            folder = adapter_dir(output_dir, "chain_sum", seeded)
            if not (folder / RESULT_FILE).is_file():
                raise dg.Failure(f"adapter {folder} is missing: materialise "
                                 f"chain_sum/{cell.split}/adapter/{cell.name} first")
            record = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
            samples = folder / VALIDATION_SAMPLES_FILE
            redo = f"re-materialise chain_sum/{cell.split}/adapter/{cell.name}"
            runs.append(dpo_search.SearchRun(
                recipe, str(cell.scorer), seeded.data_seed, int(record["best_epoch"]),
                record.get("log_history") or [],
                read_proven_parquet(folder / VALIDATION_FILE, redo),
                read_proven_parquet(samples, redo) if samples.is_file() else None))
    return runs


def dpo_search_asset(plan: TaskPlan, split: str) -> dg.AssetsDefinition:
    """The analysis over the search's two cells of ``plan`` (chain sum)."""
    cells = search_cells(plan, split)
    ins = {"base": dg.AssetIn(key=BASE_VALIDATION_KEY),
           **{f"selection_{s}": dg.AssetIn(key=selection_key("chain_sum", c))
              for s, c in cells.items()}}

    @dg.asset(key=SEARCH_KEY, group_name="testbed", io_manager_key="parquet_io", ins=ins,
              kinds={"polars", "parquet"},
              metadata=schema_metadata(dpo_search.SCHEMA, report=True),
              description="DPO's recipe search: every recipe (β x NLL anchor x η, best of up "
              "to 4 epochs) trained on the oracle's pairs and on its shuffled scores, on each "
              "data seed; per recipe Δ validation pass@1 to the base model with its 95% "
              "interval, the reward margin and log-probabilities over training, the style "
              "shift, and whether DPO's controls pass (docs/testbed.md).")
    def dpo_recipe_search(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                          base: pl.DataFrame, **selections: pl.DataFrame
                          ) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        s = profile.testbed
        assert s is not None
        runs = [run for cell in cells.values()
                for run in _runs(experiment.output_dir, plan, cell, profile.training)]
        oracle_cell = cells[POSITIVE]
        picked = chosen(selections[f"selection_{POSITIVE}"])
        config = next(c for c in plan.trained[oracle_cell] if c.name == picked)
        effective = config.training(profile.training)
        rule_choice = (effective.dpo_beta, effective.dpo_nll_weight, effective.learning_rate)
        table = dpo_search.search_table(
            runs, per_question_results(base), base, POSITIVE, NEGATIVE, rule_choice,
            s.dpo_min_effect, s.null_band)
        found = dpo_search.verdict(table)
        folder = Path(experiment.output_dir) / "chain_sum"
        figure = dpo_search.search_figure(table, runs, POSITIVE,
                                          folder / "dpo_recipe_search.png")
        verdicts = atomic_write_text(folder / "dpo_recipe_search.json",
                                     json.dumps(found, indent=2, default=float))
        best = found["best oracle Δ"]
        headline = (f"**DPO's recipe search: {found['reading']}.** {found['recipes']} recipes, "
                    f"each on the oracle and on its shuffled scores; the rule chose "
                    f"{found['chosen']} ({'passes' if found['chosen passes'] else 'fails'}); "
                    f"the best oracle Δ is {best['Δ']:+.2f} [{best['low']:+.2f}, "
                    f"{best['high']:+.2f}] at {best['recipe']}.\n\n{found['diagnosis']}")
        context.log.info(headline)
        return frame_output(table, {
            "summary": summary_entry(headline),
            "β x η": image(figure, "oracle Δ validation pass@1 over β x η (shuffled Δ in "
                          "brackets) and the reward margins over training"),
            "recipes": frame_table(table.select(
                "NLL weight", "β", "η", "oracle Δ", "oracle low", "oracle high",
                "shuffled Δ", "passes", "reward margin (last)", "chosen log-prob moved",
                "rejected log-prob moved", "style shift (TV, points)"), max_rows=20),
            "passed": bool(found["passed"]),
            "verdicts (file)": output_file(verdicts, experiment.output_dir),
            "figure (file)": output_file(figure, experiment.output_dir),
        })

    return dpo_recipe_search
