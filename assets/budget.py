"""``<task>/expected_best_by_budget``: methods at equal tuning budget (Dodge et al. 2019).

The paper reports each method's best configuration (App. B), but DPO's selection also varies
β, so its best is a maximum over more tries. This asset reads every selected main-matrix
cell's configurations (``<split>/selection/<cell>``) and reports its expected best
validation pass@1 as a function of the configurations tried, with its interval over the
configurations (``saturated_dag.analysis.budget``). The page opens on the finding in words: which
method leads at 1, 2 and 4 configurations tried, per split and scorer, with intervals
(``budget.leads``), then the same as a narrow table and one figure with a panel per split.
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


def _summary(leads: pl.DataFrame, cells: int) -> str:
    """The page's answer first: at 1, 2 and 4 configurations tried, how often σ-RRHF leads, DPO
    leads or neither, then each split and scorer's Δ with its interval, one paragraph each (a
    summary cut to the UI's inline limit keeps whole paragraphs)."""
    if leads.is_empty():
        return (f"**Methods at equal tuning budget** over {cells} selected cell(s): no split "
                "and scorer has both a σ-RRHF and a DPO selection, so there is no comparison row.")
    budgets = sorted(set(leads["configurations tried"].to_list()))
    counts = {who: int((leads["leads"] == who).sum()) for who in ("σ-RRHF", "DPO", "neither")}
    said = ", ".join(map(str, budgets[:-1])) + (" and " if len(budgets) > 1 else "") + str(
        budgets[-1])
    head = (f"**σ-RRHF vs DPO at equal tuning budget: at {said} configuration(s) tried, σ-RRHF "
            f"leads in {counts['σ-RRHF']}, DPO in {counts['DPO']}, neither in "
            f"{counts['neither']} of {leads.height} comparisons.** Δ = σ-RRHF − DPO in expected "
            "best validation pass@1 (points), 95% interval over the configurations (Dodge et "
            "al. 2019).")
    lines = [head]
    for (split, scorer), part in leads.group_by(["split", "scorer"], maintain_order=True):
        parts = [f"k={r['configurations tried']}: {r['leads']} "
                 f"({r['Δ']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}])"
                 for r in part.iter_rows(named=True)]
        lines.append(f"{split} · {scorer}: " + "; ".join(parts) + ".")
    return "\n\n".join(lines)


def _leads_table(leads: pl.DataFrame) -> pl.DataFrame:
    """The finding as the page shows it inline: narrow (split and scorer in one cell, Δ with
    its interval in one), so the panel does not scroll sideways."""
    return leads.select(
        pl.concat_str([pl.col("split"), pl.col("scorer")], separator=" · ").alias("cell"),
        pl.col("configurations tried").alias("k"),
        pl.format("{} [{}, {}]", *(pl.col(c).map_elements(lambda v: f"{v:+.2f}",
                                                          return_dtype=pl.String)
                                   for c in ("Δ", "low", "high"))).alias("Δ [95%]"),
        "leads")


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
        leads = budget.leads(scores)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(table, out / f"{BUDGET_KEY}.csv")
        atomic_write_csv(findings, out / "equal_budget_findings.csv")
        atomic_write_csv(leads, out / "equal_budget_leads.csv")
        png, _ = budget_plot(table, out / f"{BUDGET_KEY}.png",
                             f"{task}: expected best validation pass@1 by tuning budget")
        text = _summary(leads, len(cells))
        context.log.info(text)
        return frame_output(table, {
            "summary": summary_entry(text),
            "σ-RRHF vs DPO at 1, 2, 4 configurations": frame_table(_leads_table(leads),
                                                                   max_rows=max(20, leads.height)),
            "figure": image(png, "expected best validation pass@1 by configurations tried"),
            "leads (file)": output_file(out / "equal_budget_leads.csv", experiment.output_dir),
            "table (file)": output_file(out / f"{BUDGET_KEY}.csv", experiment.output_dir),
        })

    return expected_best_by_budget
