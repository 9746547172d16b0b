"""``chain_sum/testbed_validation``: the calibrated testbed's table and figure.

``docs/testbed.md`` says what it measures. The rows are ordinary cells of the plan (the
known-answer scorers' cells, each method's recipe chosen on its oracle cell), trained and
evaluated by the graph; this asset only reads their eval reports, the base model's report,
the scorer agreement table (each scorer's ρ with the oracle) and the recipe cells'
selections, so editing the analysis or its figure re-runs this asset alone, never a training.
The first screen is the answer: the controls' verdicts, then the rows, then the figure.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets._draws import FRAMES_BY_DRAW, by_data_seed
from assets._metadata import frame_output, frame_table, image, output_file, summary_entry
from assets.selection import selection_key
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis import testbed
from saturated_dag.analysis.behaviour import BASE
from saturated_dag.experiments import Cell, TaskPlan, chosen_recipe
from saturated_dag.methods import label
from saturated_dag.reporting.labels import scientific
from saturated_dag.scorers.agreement import rho_with_oracle
from saturated_dag.training.selection import chosen_rows

TESTBED_KEY = ["chain_sum", "testbed_validation"]


def _display(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows as a reader compares them: Δ with its interval in one column."""
    def fmt(v: float | None, spec: str = "+.2f") -> str:
        return "" if v is None else format(v, spec)

    return rows.select(
        "role", "method", "scorer",
        pl.col("ρ with oracle").map_elements(lambda v: fmt(v, "+.2f"), return_dtype=pl.String)
        .alias("ρ"),
        pl.struct("Δ pass@1", "Δ low", "Δ high").map_elements(
            lambda r: f"{r['Δ pass@1']:+.2f} [{r['Δ low']:+.2f}, {r['Δ high']:+.2f}]",
            return_dtype=pl.String).alias("Δ pass@1 [95% CI]"))


def _cells_display(cells: pl.DataFrame) -> pl.DataFrame:
    """Each grid point's headroom for a style effect, as a reader scans it: the base model's
    pass@1, its styles' accuracy spread and the positive control's Δ with its interval."""
    return cells.select(
        "cell", pl.col("base_pass_at_1").alias("base pass@1"),
        pl.col("style_spread").alias("style spread"),
        pl.struct("positive control Δ pass@1", "Δ low", "Δ high").map_elements(
            lambda r: "" if r["positive control Δ pass@1"] is None else
            f"{r['positive control Δ pass@1']:+.2f} [{r['Δ low']:+.2f}, {r['Δ high']:+.2f}]",
            return_dtype=pl.String).alias("positive control Δ"))


def testbed_cells(plan: TaskPlan, split: str) -> list[Cell]:
    """The main-matrix cells the testbed reads: every cell of ``split`` (its methods'
    positive and negative controls, the dial, the real scorers, SFT and its controls)."""
    return [c for c in plan.main if c.split == split]


def hard_control_cells(plan: TaskPlan) -> list[Cell]:
    """The hard split's DPO cells on random and on half-swapped pairs: its known-signal
    control (``training.hard_pair_control``); none when the plan does not train the latter."""
    cells = {c.scorer: c for c in plan.main if c.split == "hard" and c.method == "dpo"
             and c.scorer in testbed.HARD_ROLES}
    return [cells[pick] for pick in testbed.HARD_ROLES] if len(cells) == 2 else []


def recipe_label(settings: dict) -> str:
    """A recipe as the table names it (``η=3e-4, β=5``: the learning rate written as on the
    runs table and the selection pages, ``reporting.labels.scientific``)."""
    names = {"learning_rate": "η", "dpo_beta": "β", "epochs": "epochs",
             "batch_size": "batch", "rrhf_rank_weight": "λ"}
    return ", ".join(f"{names[k]}={scientific(v)}" if k == "learning_rate"
                     else f"{names[k]}={v:g}" for k, v in settings.items()
                     ) or "the profile's settings"


def testbed_asset(plan: TaskPlan, split: str, by_draw: bool = False) -> dg.AssetsDefinition:
    """The analysis over ``split``'s cells of ``plan`` (chain sum). ``by_draw``: the agreement
    table and the difficulty partitions have one partition per data seed, read together."""
    per_draw = {"dagster_type": FRAMES_BY_DRAW} if by_draw else {}
    cells = testbed_cells(plan, split)
    hard = hard_control_cells(plan)
    # each row's recipe cell: the cell whose selection chose what it trains (itself when it
    # selects its own, as every cell of a profile without training.recipes does)
    sources = {c: plan.recipe_cell(c) or c for c in cells}
    choosers = list(dict.fromkeys(s for s in sources.values() if s in plan.selections))
    ins = {"base": dg.AssetIn(key=["chain_sum", "eval", "base"]),
           "agreement": dg.AssetIn(key=["chain_sum", "scorer_agreement"], **per_draw),
           "partitions": dg.AssetIn(key=["chain_sum", "difficulty_partitions"], **per_draw),
           **{f"eval_{i}": dg.AssetIn(key=["chain_sum", c.split, "eval", c.name])
              for i, c in enumerate(cells)},
           **{f"hard_{c.scorer}": dg.AssetIn(key=["chain_sum", c.split, "eval", c.name])
              for c in hard},
           **{f"selection_{i}": dg.AssetIn(key=selection_key("chain_sum", c))
              for i, c in enumerate(choosers)}}

    @dg.asset(
        key=TESTBED_KEY, group_name="testbed", io_manager_key="parquet_io", ins=ins,
        kinds={"polars", "parquet"}, metadata=schema_metadata("testbed_validation", report=True),
        description="The calibrated testbed: each method's positive control (the oracle), "
        "negative control (shuffled scores) and reliability dial, beside the real scorers; "
        "each row a paired Δ pass@1 to the base model with its 95% interval (docs/testbed.md).")
    def testbed_validation(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                           base: pl.DataFrame, agreement: Any,
                           partitions: Any, **reports: pl.DataFrame
                           ) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        s = profile.testbed
        assert s is not None
        draws = by_data_seed(partitions)
        try:
            testbed.check_training_sizes(s, draws)
        except ValueError as err:
            raise dg.Failure(str(err)) from None
        counts = {d: frame.filter(pl.col("split") == split).height for d, frame in draws.items()}
        training_questions: int | dict[str, int] = (
            counts[0] if len(counts) == 1 else {f"data seed {d}": n for d, n in counts.items()})
        selections = {c: reports[f"selection_{i}"] for i, c in enumerate(choosers)}
        try:
            recipes = {(c.method, c.scorer or "sft"): recipe_label(chosen_recipe(
                profile.training, source, c.method, chosen_rows(selections.get(source))))
                for c, source in sources.items()}
        except ValueError as err:  # a selection that marks no or several rows chosen
            raise dg.Failure(str(err)) from None
        evals = {(c.method, c.scorer or "sft"): reports[f"eval_{i}"]
                 for i, c in enumerate(cells)}
        selection = pl.concat([t.select(pl.lit(label(c.method)).alias("method"),
                                        pl.lit(c.name).alias("cell"), pl.all())
                               for c, t in selections.items()], how="vertical_relaxed"
                              ) if selections else pl.DataFrame()
        # every draw's questions together: each scorer's mean ρ with the oracle over them
        rho = rho_with_oracle(pl.concat(list(by_data_seed(agreement).values())), split)
        result = testbed.analyse(s, base, evals, recipes, rho, selection, {
            "agreement with the oracle": rho, "training questions": training_questions,
            "recipes": {f"{label(m)} · {sc}": text for (m, sc), text in recipes.items()}},
            hard={c.scorer or "": reports[f"hard_{c.scorer}"] for c in hard})
        folder = Path(experiment.output_dir) / "chain_sum"
        paths = testbed.write_outputs(result, folder)
        headline = testbed.headline(result)
        rules = testbed.rules(result)
        context.log.info(f"testbed: {headline} Rules: {rules}")
        v = result.verdicts
        # inline tables no wider than the UI's metadata panel: every
        # column of rows, cells and styles is in their Parquet files, linked below
        return frame_output(result.rows, {
            "summary": summary_entry(f"**Testbed.** {headline}\n\n"
                                     f"{v['smallest detectable effect']['reading']}."),
            "rules": rules,
            "rows": frame_table(_display(result.rows), max_rows=40),
            "dose-response": image(paths["figure"], "Δ pass@1 against agreement with the "
                                   "oracle"),
            "cells": frame_table(_cells_display(result.cells), max_rows=20),
            "style shift (base model, positive control, SFT)": frame_table(
                result.styles.filter(pl.col("row").is_in(
                    [BASE, "σ-RRHF · oracle", "SFT · sft"])).select(
                        "row", "cell", "style", "Δ share"), max_rows=20),
            "rows (file)": output_file(paths["rows"], experiment.output_dir),
            "cells (file)": output_file(paths["cells"], experiment.output_dir),
            **{f"{name} passed": bool(verdict["passed"]) for name, verdict in v.items()
               if name.startswith((testbed.POSITIVE, testbed.NEGATIVE))},
            "facts": dg.MetadataValue.json(json.loads(json.dumps(result.facts,
                                                                 default=float))),
            "verdicts (file)": output_file(paths["verdicts"], experiment.output_dir),
            "figure (file)": output_file(paths["figure"], experiment.output_dir),
            "styles (file)": output_file(paths["styles"], experiment.output_dir),
        })

    return testbed_validation
