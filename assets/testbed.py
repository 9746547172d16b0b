"""``chain_sum/testbed_validation``: the calibrated testbed's table and figure.

``docs/testbed.md`` says what it measures.

One asset over ``saturated_dag.testbed``: its own pools (one per data seed), the known-answer
scorers, each method's recipe chosen on validation, every replicate run and the analysis. The
heavy work runs in one-thread worker processes and is kept on disk per item under the output
folder, so a killed materialisation resumes where it stopped. The first screen is the answer:
the controls' verdicts, then the validation table, then the dose-response figure.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets._metadata import frame_output, frame_table, image
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag import testbed
from saturated_dag.behaviour import BASE

TESTBED_KEY = ["chain_sum", "testbed_validation"]


def _display(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows as a reader compares them: Δ with its interval in one column."""
    def fmt(v: float | None, spec: str = "+.2f") -> str:
        return "" if v is None else format(v, spec)

    return rows.select(
        "role", "method", "scorer", "recipe",
        pl.col("ρ with oracle").map_elements(lambda v: fmt(v, "+.2f"), return_dtype=pl.String),
        pl.col("pass@1").map_elements(lambda v: fmt(v, ".2f"), return_dtype=pl.String),
        pl.struct("Δ pass@1", "Δ low", "Δ high").map_elements(
            lambda r: f"{r['Δ pass@1']:+.2f} [{r['Δ low']:+.2f}, {r['Δ high']:+.2f}]",
            return_dtype=pl.String).alias("Δ pass@1 [95% CI]"),
        pl.col("detectable effect").map_elements(lambda v: fmt(v, ".2f"),
                                                 return_dtype=pl.String),
        "replicates", "questions")


def testbed_asset() -> dg.AssetsDefinition:
    @dg.asset(
        key=TESTBED_KEY, group_name="testbed", io_manager_key="parquet_io",
        deps=["base_model"], kinds={"polars", "parquet"},
        metadata=schema_metadata("testbed_validation", report=True),
        description="The calibrated testbed: σ-RRHF and DPO each with the oracle (its "
        "positive control), its shuffled scores (its negative control) and the reliability "
        "dial, SFT with its two controls, and the real scorers; each row a paired Δ pass@1 "
        "to the base model with its 95% interval over data seeds, training seeds and "
        "questions (docs/testbed.md).")
    def testbed_validation(context: dg.AssetExecutionContext,
                           experiment: ExperimentResource) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        code = context.assets_def.code_versions_by_key.get(context.asset_key)
        result = testbed.run_testbed(profile, experiment.output_dir, log=context.log.info,
                                     code_version=code)
        folder = Path(experiment.output_dir) / "chain_sum"
        paths = testbed.write_outputs(result, folder)
        headline = testbed.headline(result)
        context.log.info(f"testbed: {headline}")
        v = result.verdicts
        return frame_output(result.rows, {
            "headline": dg.MetadataValue.md(f"**Testbed.** {headline}\n\n"
                                            f"{v['smallest detectable effect']['reading']}."),
            "validation table": frame_table(_display(result.rows), max_rows=100),
            "dose-response": image(paths["figure"], "Δ pass@1 against agreement with the "
                                   "oracle"),
            "cells": frame_table(result.cells, max_rows=20),
            "style shift (base model, positive control, SFT)": frame_table(
                result.styles.filter(pl.col("row").is_in(
                    [BASE, "σ-RRHF · oracle", "SFT · sft"])), max_rows=60),
            "recipe selection": frame_table(result.selection, max_rows=40, decimals=4),
            **({} if result.dpo_search is None else {
                "DPO recipe search": dg.MetadataValue.md(
                    f"{v['DPO recipe search']['reading']}. "
                    f"{v['DPO recipe search']['diagnosis']}"),
                "DPO recipe search (grid)": image(paths["dpo search figure"],
                                                  "DPO: oracle and shuffled Δ over β x η"),
                "DPO recipe search (table)": frame_table(result.dpo_search, max_rows=60,
                                                         decimals=3)}),
            **{f"{name} passed": bool(verdict["passed"]) for name, verdict in v.items()
               if name.startswith((testbed.POSITIVE, testbed.NEGATIVE))},
            "facts": dg.MetadataValue.json(json.loads(json.dumps(
                {k: v for k, v in result.facts.items() if k != "folder"}, default=float))),
            "verdicts (file)": dg.MetadataValue.path(str(paths["verdicts"])),
            "figure (file)": dg.MetadataValue.path(str(paths["figure"])),
            "styles (file)": dg.MetadataValue.path(str(paths["styles"])),
        })

    return testbed_validation
