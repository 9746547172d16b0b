"""``<task>/expected_best_by_budget``: methods at equal tuning budget (Dodge et al. 2019).

The paper reports each method's best configuration (App. B), but DPO's selection also varies
β, so its best is a maximum over more tries. This asset reads every selected main-matrix
cell's configurations (``<split>/selection/<cell>``) and reports its expected best
validation pass@1 as a function of the configurations tried, with its interval over the
configurations (``saturated_dag.analysis.budget``); a figure per split; and the findings row "σ-RRHF
vs DPO at equal budget" per split and scorer. The first screen is the findings row.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._metadata import frame_output, frame_table, image, output_file, summary_entry
from assets.selection import selection_key
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis import budget
from saturated_dag.experiments import Cell
from saturated_dag.infra.atomic import atomic_write_csv
from saturated_dag.methods import label
from saturated_dag.reporting.plots import budget_plot

BUDGET_KEY = "expected_best_by_budget"


def _summary(findings: pl.DataFrame, cells: int) -> str:
    if findings.is_empty():
        return (f"**Methods at equal tuning budget** over {cells} selected cell(s): no split "
                "and scorer has both a σ-RRHF and a DPO selection, so there is no comparison row.")
    rows = [f"{r['split']} · {r['scorer']}: σ-RRHF {r['σ-RRHF expected best']:.2f} vs DPO "
            f"{r['DPO expected best']:.2f} at {r['configurations tried']} configuration(s) "
            f"tried, Δ {r['Δ']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}] ({r['verdict']})"
            for r in findings.iter_rows(named=True)]
    return ("**σ-RRHF vs DPO at equal budget** (expected best validation pass@1, %, when k "
            "configurations of each method are tried; 95% interval over the configurations; "
            "Dodge et al. 2019):\n\n" + "\n".join(f"- {r}" for r in rows))


def budget_asset(task: str, cells: list[Cell]) -> dg.AssetsDefinition:
    """``cells``: the main matrix's cells with more than one configuration."""
    ins = {f"selection_{i}": dg.AssetIn(key=selection_key(task, c)) for i, c in enumerate(cells)}

    @dg.asset(key=[task, BUDGET_KEY], group_name=task, ins=ins, io_manager_key="parquet_io",
              kinds={"polars", "parquet"},
              metadata=schema_metadata("expected_best_by_budget", report=True),
              description=f"{task}: each method's expected best validation pass@1 by the "
              "number of configurations tried, and σ-RRHF vs DPO at equal budget.")
    def expected_best_by_budget(context: dg.AssetExecutionContext,
                                experiment: ExperimentResource,
                                **selections: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        scores = {(c.split, label(c.method), c.scorer or "-", c.name):
                 selections[f"selection_{i}"]["validation pass@1"].to_list()
                 for i, c in enumerate(cells)}
        table = budget.budget_table(scores)
        findings = budget.equal_budget_rows(scores)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(table, out / f"{BUDGET_KEY}.csv")
        atomic_write_csv(findings, out / "equal_budget_findings.csv")
        png, _ = budget_plot(table, out / f"{BUDGET_KEY}.png",
                             f"{task}: expected best validation pass@1 by tuning budget")
        text = _summary(findings, len(cells))
        context.log.info(text)
        return frame_output(table, {
            "summary": summary_entry(text),
            "figure": image(png, "expected best validation pass@1 by configurations tried"),
            "σ-RRHF vs DPO at equal budget": frame_table(findings, max_rows=20),
            "table": frame_table(table, max_rows=20),
            "table (file)": output_file(out / f"{BUDGET_KEY}.csv", experiment.output_dir),
        })

    return expected_best_by_budget
