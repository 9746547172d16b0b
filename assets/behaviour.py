"""``<task>/behaviour``: what training changed in each adapter's answers, per eval cell.

From the per-sample eval reports of the base model and the main table's adapters: pass@1,
completion length, mean token entropy, answer-format and truncation rates per cell, each with
its change from the base model, and Δ pass@1's 95% interval paired over the cell's questions
(``saturated_dag.analysis.behaviour``). On the embedded arithmetic model
also the mix of solution styles and each style's accuracy per cell (``styles.csv``, and the
``styles`` metadata table, and a figure of each adapter's style shift per cell), since its
styles are known. A figure shows Δ pass@1 and Δ length per adapter and cell, each number in its
square. The metadata leads with ``summary`` (``behaviour.summary``), then the figure, then at
most ``INLINE_ROWS`` rows of each table (the largest changes; every row in the CSVs).
"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._metadata import (
    eval_report_ins,
    frame_output,
    frame_table,
    image,
    output_file,
    summary_entry,
)
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis.behaviour import BASE, behaviour_table, style_table, summary
from saturated_dag.experiments import Cell
from saturated_dag.infra.atomic import atomic_write_csv
from saturated_dag.reporting.plots import behaviour_heatmaps, style_shift
from saturated_dag.reporting.result_tables import NOT_APPLICABLE, with_interval
from saturated_dag.reporting.runs_table import INLINE_ROWS
from saturated_dag.tasks.solution_styles import detect_style

EMBEDDED_MODEL = "arith-base"
"""The shipped model whose solution styles ``detect_style`` knows."""

FIGURE_NOTE = ("Figure (the entry's link): per adapter and eval cell, Δ pass@1 (points; * where "
               "its 95% paired interval over the cell's questions excludes 0) and Δ mean tokens "
               "(the table has no interval for length), each number written in its cell; the "
               "base model's rows are left out (0 by construction).")


def _delta_text(value: float | None, low: float | None, high: float | None, base: bool,
                spec: str = "+.2f") -> str:
    """A Δ cell: ``NOT_APPLICABLE`` on the base model's rows, else the signed value with its
    interval when it has one."""
    if base:
        return NOT_APPLICABLE
    return "" if value is None else with_interval(format(value, spec), low, high, signed=True)


def shown(table: pl.DataFrame) -> pl.DataFrame:
    """The behaviour table as the UI shows it inline: narrow (the UI gives a metadata value
    little width and wraps no header), Δ pass@1 with its interval in one cell and
    the change in mean length, ``—`` for the base model's Δ (0 by construction, not a
    measurement), names that can wrap; pass@1, Δ answer rate and every other column are in
    the CSV."""
    base = [r == BASE for r in table["row"]]
    columns = {
        "Δ pass@1": [_delta_text(v, lo, hi, b) for (v, lo, hi), b in zip(
            table.select("Δ pass@1", "Δ pass@1 low", "Δ pass@1 high").iter_rows(), base,
            strict=True)],
        "Δ tokens": [_delta_text(v, None, None, b) for v, b in zip(
            table["Δ mean_tokens"], base, strict=True)]}
    return table.select(
        _wrappable("row").alias("adapter"), "cell",
        *(pl.Series(name, values, pl.String) for name, values in columns.items()))


def _wrappable(column: str) -> pl.Expr:
    """An ``<split>/<adapter>`` name with spaces around its ``/``, so the UI can wrap it."""
    return pl.col(column).str.replace_all("/", " / ", literal=True)


def shown_styles(styles: pl.DataFrame) -> pl.DataFrame:
    """The style rows inline: which row, cell and style, and its Δ share (headers the UI does
    not wrap, kept short); the samples, shares and accuracies are in ``styles.csv``."""
    return styles.select(_wrappable("row"), "cell", "style", "Δ share")




def largest_changes(table: pl.DataFrame, rows: int = INLINE_ROWS) -> pl.DataFrame:
    """The base model's rows, then the adapter × cell rows with the largest |Δ pass@1|, at
    most ``rows`` in all, in the table's order: what a reader looks at first."""
    base = table.filter(pl.col("row") == BASE).head(rows)
    runs = table.with_row_index("_order").filter(pl.col("row") != BASE)
    picked = runs.sort(pl.col("Δ pass@1").abs(), descending=True, nulls_last=True,
                       maintain_order=True).head(max(0, rows - base.height))
    return pl.concat([base, picked.sort("_order").drop("_order")])


def largest_shifts(styles: pl.DataFrame, rows: int = INLINE_ROWS) -> pl.DataFrame:
    """The ``rows`` style rows with the largest |Δ share|, in the table's order."""
    return (styles.with_row_index("_order")
            .sort(pl.col("Δ share").abs(), descending=True, nulls_last=True, maintain_order=True)
            .head(rows).sort("_order").drop("_order"))


def inline_note(shown_rows: int, total: int, what: str, file: str) -> str:
    """The line under a summary that says what an inline table leaves out, and where it is."""
    if shown_rows >= total:
        return f"{what}: all {total} rows inline."
    return f"{what}: {shown_rows} of {total} rows inline; all of them in `{file}`."


def behaviour_asset(task: str, experiments: list[Cell]) -> dg.AssetsDefinition:
    ins = eval_report_ins(task, experiments)

    @dg.asset(key=[task, "behaviour"], group_name=task, ins=ins, io_manager_key="parquet_io",
              kinds={"polars", "parquet"}, metadata=schema_metadata("behaviour", report=True),
              description=f"{task}: per eval cell, how each adapter's answers differ from the "
              "base model's (accuracy, length, entropy, answer format; styles on the "
              "embedded model).")
    def behaviour(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                  **reports: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        runs = {f"{e.split}/{e.name}": reports[f"run_{i}"] for i, e in enumerate(experiments)}
        table = behaviour_table(reports["base"], runs)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(table, out / "behaviour.csv")
        png, svg = behaviour_heatmaps(table, out / "behaviour.png",
                                      f"{task}: change from the base model, per eval cell")
        inline = largest_changes(table)
        notes = [inline_note(inline.height, table.height, "Table (the base model's rows, then "
                             "the largest |Δ pass@1|)", "behaviour.csv")]
        styled = profile.policy.model == EMBEDDED_MODEL and task == "chain_sum"
        styles = style_table(reports["base"], runs, detect_style) if styled else None
        if styles is not None:
            notes.append(inline_note(min(INLINE_ROWS, styles.height), styles.height,
                                     "Styles (the largest |Δ share|)", "styles.csv"))
        metadata: dict[str, object] = {
            "summary": summary_entry(summary(table)),
            "figure": image(png, "Δ pass@1 and Δ length per adapter and cell"),
            "table": frame_table(shown(inline), max_rows=INLINE_ROWS),
            # under the table, not in the summary, which then ends on the page's first screen
            "inline rows": " ".join(notes),
            "about the figure": dg.MetadataValue.md(FIGURE_NOTE),
            "csv": output_file(out / "behaviour.csv", experiment.output_dir),
            "figure (SVG)": output_file(svg, experiment.output_dir),
        }
        if styles is not None:
            atomic_write_csv(styles, out / "styles.csv")
            metadata["styles"] = frame_table(shown_styles(largest_shifts(styles)),
                                             max_rows=INLINE_ROWS, formats={"Δ share": "+.2f"})
            metadata["styles csv"] = output_file(out / "styles.csv", experiment.output_dir)
            figure, vector = style_shift(styles, out / "styles.png",
                                         f"{task}: change in solution-style share from the "
                                         "base model")
            metadata["styles figure"] = image(figure, "style shift per adapter and cell")
            metadata["styles figure (SVG)"] = output_file(vector, experiment.output_dir)
            context.log.info(f"solution styles per cell written to {out / 'styles.csv'}")
        return frame_output(table, metadata)

    return behaviour
