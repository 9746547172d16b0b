"""``chain_sum/validation/base`` and ``chain_sum/dpo_recipe_search``: DPO's recipe search and
diagnosis.

``docs/testbed.md`` ("DPO's recipe search", "DPO's diagnosis") says what they answer. A
profile with ``testbed.analysis: dpo_recipe_search`` (``dpo_search``, ``dpo_diagnosis``) trains
DPO on the oracle and on its shuffled scores (the planted signal), and where it trains the
hard split with ``hard_pair_control``, on the random correct-vs-incorrect pairs and the same
pairs half swapped (correctness), each cell over all its configurations, as ordinary cells of
the plan. This module adds:

- the base model's validation results (``chain_sum/validation/base``): the reference every
  recipe's validation pass@1 is read against (the same questions, prompts, sampling and answer
  rule as each training's validation, ``training/runner.py``);
- the analysis, which reads the cells' selections (every configuration and the rule's
  choice), the difficulty partitions (the training sets' guard, ``testbed.min_training_questions``)
  and each configuration's adapters' own files (training log, kept epoch, validation results
  and completions), so editing it re-runs no training.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir, adapter_key
from assets._draws import FRAMES_BY_DRAW, by_data_seed
from assets._metadata import frame_output, frame_table, image, output_file, summary_entry
from assets._priority import POLICY_ENGINE, priority
from assets.selection import selection_key
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis import dpo_search
from saturated_dag.analysis.testbed import check_training_sizes, styled_cells, training_size
from saturated_dag.config import Profile, TrainingSettings
from saturated_dag.data.questions import validation_questions
from saturated_dag.evaluation.reports import evaluate_samples, per_question_results, summarise
from saturated_dag.experiments import HARD_PAIRS_SHUFFLED, Cell, TaskPlan
from saturated_dag.infra.atomic import atomic_write_text, read_proven_parquet
from saturated_dag.scorers.oracle import style_spread
from saturated_dag.training.folders import RESULT_FILE, VALIDATION_FILE, VALIDATION_SAMPLES_FILE
from saturated_dag.training.selection import chosen

SEARCH_KEY = ["chain_sum", "dpo_recipe_search"]
BASE_VALIDATION_KEY = ["chain_sum", "validation", "base"]
POSITIVE, NEGATIVE = "oracle", "oracle_shuffled"
CORRECT, SWAPPED = "random", HARD_PAIRS_SHUFFLED


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
        questions = experiment.plan[task].questions.validation
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


def search_cells(plan: TaskPlan, split: str) -> dict[str, dict[str, Cell]]:
    """The search's cells by signal: ``planted``, DPO ranked by the oracle and by its shuffle
    on ``split``; ``correctness``, when the plan trains them, DPO on the hard split's random
    pairs and on the same pairs half swapped. Each must select over several configurations."""
    def dpo_cells(on: str, names: tuple[str, str]) -> dict[str, Cell]:
        return {c.scorer: c for c in plan.main if c.split == on and c.method == "dpo"
                and c.scorer in names}

    planted = dpo_cells(split, (POSITIVE, NEGATIVE))
    missing = [s for s in (POSITIVE, NEGATIVE) if s not in planted]
    if missing:
        raise ValueError(f"testbed.analysis dpo_recipe_search: the {split} split has no DPO "
                         f"cell ranked by {', '.join(missing)}; list them in "
                         "training.method_scorers.dpo")
    found = {"planted": planted}
    correctness = dpo_cells("hard", (CORRECT, SWAPPED))
    if len(correctness) == 2:
        found["correctness"] = correctness
    not_selected = [c.name for cells in found.values() for c in cells.values()
                    if c not in plan.selections]
    if not_selected:
        raise ValueError(f"testbed.analysis dpo_recipe_search: {', '.join(not_selected)} "
                         "trains one configuration; the search needs several "
                         "(training.selection) and no training.recipes")
    return found


def reference_cells(plan: TaskPlan, split: str) -> dict[str, Cell]:
    """SFT's cells by the signal whose training questions they train on (``planted``: the
    ``split`` split, ``correctness``: the hard split), where the plan trains SFT: the
    references that say whether those questions teach any method here."""
    found = {c.split: c for c in plan.main if c.method == "sft"}
    return {signal: found[on] for signal, on in (("planted", split), ("correctness", "hard"))
            if on in found}


def _runs(output_dir: str, plan: TaskPlan, cell: Cell, training: TrainingSettings
          ) -> list[dpo_search.SearchRun]:
    """Every adapter of ``cell`` as the analysis reads it, from its own folder."""
    runs = []
    for config, seeds in plan.trained[cell].items():
        recipe = dpo_search.recipe_of(config, training)
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


def styled_questions(profile: Profile, base: pl.DataFrame, min_spread: float) -> tuple[str, ...]:
    """The validation questions of the cells where the base model's own validation samples
    show styles that differ by at least ``min_spread`` points in accuracy
    (``scorers.oracle.style_spread``, the testbed's rule on its eval set): where the planted
    signal can move pass@1."""
    cells = {q.question_id: q.cell for q in validation_questions(profile, "chain_sum")}
    spread = style_spread(base.with_columns(cell=pl.col("question_id").replace_strict(cells)),
                          min_spread)
    try:
        usable = set(styled_cells(spread, "validation"))
    except ValueError as err:
        raise dg.Failure(str(err)) from None
    return tuple(sorted(q for q, c in cells.items() if c in usable))


def dpo_search_asset(plan: TaskPlan, split: str, by_draw: bool = False) -> dg.AssetsDefinition:
    """The analysis over the search's cells of ``plan`` (chain sum). ``by_draw``: the
    difficulty partitions have one partition per data seed, read together."""
    cells = search_cells(plan, split)
    references = reference_cells(plan, split)
    per_draw = {"dagster_type": FRAMES_BY_DRAW} if by_draw else {}
    ins = {"base": dg.AssetIn(key=BASE_VALIDATION_KEY),
           "partitions": dg.AssetIn(key=["chain_sum", "difficulty_partitions"], **per_draw),
           **{f"selection_{signal}_{role}": dg.AssetIn(key=selection_key("chain_sum", c))
              for signal, found in cells.items() for role, c in found.items()}}

    # SFT's references are read from their adapters' own files: their assets come first
    @dg.asset(key=SEARCH_KEY, group_name="testbed", io_manager_key="parquet_io", ins=ins,
              deps=[adapter_key("chain_sum", c) for c in references.values()],
              kinds={"polars", "parquet"},
              metadata=schema_metadata(dpo_search.SCHEMA, report=True),
              description="DPO's recipe search: every recipe (loss x β x NLL anchor x η, each "
              "run keeping its best epoch) trained on a known signal's pairs and on the same "
              "signal shuffled, on each data seed (the planted signal; correctness where the "
              "hard split is trained); per recipe Δ validation pass@1 with its 95% interval, "
              "the reward margin, log-ratios and log-probabilities over training, the style "
              "shift, whether the signal's control passes, and the cause the signals point to "
              "(docs/testbed.md).")
    def dpo_recipe_search(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                          base: pl.DataFrame, partitions: Any, **selections: pl.DataFrame
                          ) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        s = profile.testbed
        assert s is not None
        draws = by_data_seed(partitions)
        try:
            check_training_sizes(s, draws)
        except ValueError as err:
            raise dg.Failure(str(err)) from None
        sizes = {f"{name} (data seed {d})": training_size(frame, name)
                 for name in s.minimums() for d, frame in sorted(draws.items())}
        signals = [dpo_search.Signal("planted", POSITIVE, NEGATIVE, "base", s.dpo_min_effect,
                                     styled_questions(profile, base, s.positive_min_effect))]
        if "correctness" in cells:
            signals.append(dpo_search.Signal("correctness", CORRECT, SWAPPED, "contrast",
                                             s.hard_min_effect))
        runs, chosen_recipes = [], {}
        for signal in signals:
            found = cells[signal.name]
            for cell in found.values():
                runs += _runs(experiment.output_dir, plan, cell, profile.training)
            picked = chosen(selections[f"selection_{signal.name}_{signal.positive}"])
            config = next(c for c in plan.trained[found[signal.positive]] if c.name == picked)
            chosen_recipes[signal.name] = dpo_search.recipe_of(config, profile.training)
        validation = per_question_results(base)
        table = dpo_search.search_table(runs, validation, base, signals, chosen_recipes,
                                        s.null_band)
        found = dpo_search.verdict(table, {
            signal.name: dpo_search.reference_deltas(
                signal, _runs(experiment.output_dir, plan, references[signal.name],
                              profile.training), validation)
            for signal in signals if signal.name in references})
        found["training questions"] = sizes
        found["planted signal's validation questions"] = len(signals[0].questions or ())
        folder = Path(experiment.output_dir) / "chain_sum"
        figure = dpo_search.search_figure(table, runs, signals, folder / "dpo_recipe_search.png")
        verdicts = atomic_write_text(folder / "dpo_recipe_search.json",
                                     json.dumps(found, indent=2, default=float))
        headline = summary_text(found)
        context.log.info(headline)
        return frame_output(table, {
            "summary": summary_entry(headline),
            "verdicts by loss": frame_table(verdict_rows(found), max_rows=40),
            "signal x loss x β x η": image(figure, "Δ validation pass@1 per signal over loss x β "
                                           "x η (shuffled Δ in brackets) and the log-ratios "
                                           "over training"),
            "recipes": frame_table(table.select(
                "signal", "DPO loss", "NLL weight", "β", "η", "signal Δ", "signal low",
                "signal high", "shuffled Δ", "contrast Δ", "passes", "reward margin (last)",
                "chosen log-ratio (last)", "rejected log-ratio (last)"), max_rows=20),
            "passed": bool(found["signals"]["planted"]["passed"]),
            "cause": found["cause"],
            "verdicts (file)": output_file(verdicts, experiment.output_dir),
            "figure (file)": output_file(figure, experiment.output_dir),
        })

    return dpo_recipe_search


def verdict_rows(found: dict[str, Any]) -> pl.DataFrame:
    """One row per signal and loss (anchor included): its recipes, how many pass, and its
    best recipe's Δ with the interval, against the shuffle too; then SFT's reference on the
    signal's training questions, where the run trains it."""
    rows = []
    for signal, v_signal in found["signals"].items():
        rows += [{"signal": signal, "loss": arm,
                  "passing": f"{len(v['passing'])} of {v['recipes']}",
                  "best recipe": v["best"]["recipe"], "Δ": v["best"]["Δ"],
                  "low": v["best"]["low"], "high": v["best"]["high"],
                  "shuffled Δ": v["best"]["shuffled Δ"], "vs shuffled": v["best"]["contrast Δ"]}
                 for arm, v in v_signal["by loss"].items()]
        reference = v_signal.get("SFT reference")
        if reference is not None:
            best = reference["best"]
            rows.append({"signal": signal, "loss": "SFT (reference: no pairs)",
                         "passing": f"{sum(r['reaches the bar'] for r in reference['by η'])} "
                                    f"of {len(reference['by η'])} reach the bar",
                         "best recipe": f"η={best['η']:.0e}", "Δ": best["Δ"],
                         "low": best["low"], "high": best["high"], "shuffled Δ": None,
                         "vs shuffled": None})
    return pl.DataFrame(rows)


def summary_text(found: dict[str, Any]) -> str:
    """The page's opening: the cause in words, then per signal what passed and its best Δ."""
    parts = [f"**DPO's recipe search: {found['reading']}.**"]
    for name, v in found["signals"].items():
        best = v["best Δ"]
        parts.append(f"{name.capitalize()} signal: {len(v['passing'])} of {v['recipes']} "
                     f"recipes pass; the rule chose {v['chosen']} "
                     f"({'passes' if v['chosen passes'] else 'fails'}); the best Δ is "
                     f"{best['Δ']:+.2f} [{best['low']:+.2f}, {best['high']:+.2f}] at "
                     f"{best['recipe']}.")
        reference = v.get("SFT reference")
        if reference is not None:
            top = reference["best"]
            parts.append(f"SFT on the same training questions: {top['Δ']:+.2f} "
                         f"[{top['low']:+.2f}, {top['high']:+.2f}] at η={top['η']:.0e}.")
    sizes = ", ".join(f"{k} {n}" for k, n in found["training questions"].items())
    parts.append(f"Training questions: {sizes}.")
    return " ".join(parts) + "\n\n" + "\n\n".join(
        f"{name.capitalize()}: {v['diagnosis']}" for name, v in found["signals"].items())
