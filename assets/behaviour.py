"""``<task>/behaviour``: what training changed in each adapter's answers, per eval cell.

From the per-sample eval reports of the base model and the main table's adapters: pass@1,
completion length, mean token entropy, answer-format and truncation rates per cell, each with
its change from the base model, and Δ pass@1's 95% interval paired over the cell's questions
(``saturated_dag.behaviour``). On the embedded arithmetic model
also the mix of solution styles and each style's accuracy per cell (``styles.csv``, and the
``styles`` metadata table, and a figure of each adapter's style shift per cell), since its
styles are known. A figure shows Δ pass@1 and Δ length per adapter and cell.
"""

from pathlib import Path

import dagster as dg
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from assets._metadata import eval_report_ins, frame_output, frame_table, image, save_figure
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.atomic import atomic_write_csv
from saturated_dag.behaviour import behaviour_table, style_table
from saturated_dag.experiments import Experiment
from saturated_dag.pretrain.styles import detect_style
from saturated_dag.result_tables import with_interval

EMBEDDED_MODEL = "arith-base"
"""The shipped model whose solution styles ``detect_style`` knows."""


def _heatmaps(table: pl.DataFrame, path: Path, title: str) -> Path:
    rows = table["row"].unique(maintain_order=True).to_list()
    cells = sorted(table["cell"].unique().to_list())
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.2 * len(cells), 1.5 + 0.3 * len(rows)))
    for ax, measure, unit in ((axes[0], "Δ pass@1", "points"),
                              (axes[1], "Δ mean_tokens", "tokens")):
        grid = [[table.filter((pl.col("row") == r) & (pl.col("cell") == c))[measure].item()
                 for c in cells] for r in rows]
        limit = max(1e-9, max(abs(v) for line in grid for v in line))
        shown = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(cells)), cells, fontsize=8, rotation=45)
        ax.set_yticks(range(len(rows)), rows if ax is axes[0] else [""] * len(rows),
                      fontsize=7)
        ax.set_title(f"{measure} ({unit})", fontsize=9)
        fig.colorbar(shown, ax=ax, fraction=0.05)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def _style_shift(styles: pl.DataFrame, path: Path, title: str) -> Path:
    """One panel per eval cell: each adapter's change in style share from the base model
    (points, colour), with the style's accuracy in that row written in the square."""
    rows = styles["row"].unique(maintain_order=True).to_list()
    cells = sorted(styles["cell"].unique().to_list())
    kinds = sorted(styles["style"].unique().to_list())
    fig, axes = plt.subplots(1, len(cells) + 1, squeeze=False,  # the last holds the scale
                             gridspec_kw={"width_ratios": [1] * len(cells) + [0.06]},
                             figsize=(1.6 + 0.55 * len(kinds) * len(cells),
                                      1.6 + 0.28 * len(rows)))
    limit = max(1e-9, float(styles["Δ share"].abs().max() or 0.0))
    shown = None
    for ax, cell in zip(axes[0][:-1], cells, strict=True):
        part = styles.filter(pl.col("cell") == cell)
        lookup = {(r["row"], r["style"]): r for r in part.iter_rows(named=True)}
        grid = [[lookup[(r, k)]["Δ share"] if (r, k) in lookup else 0.0 for k in kinds]
                for r in rows]
        shown = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        for i, r in enumerate(rows):
            for j, k in enumerate(kinds):
                found = lookup.get((r, k))
                if found is not None and found["accuracy"] is not None and found["samples"]:
                    ax.text(j, i, f"{found['accuracy']:.0f}", ha="center", va="center",
                            fontsize=5)
        ax.set_xticks(range(len(kinds)), kinds, fontsize=7, rotation=60)
        ax.set_yticks(range(len(rows)), rows if ax is axes[0][0] else [""] * len(rows),
                      fontsize=6)
        ax.set_title(cell, fontsize=8)
    fig.colorbar(shown, cax=axes[0][-1], label="Δ share (points)")
    fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)


def _shown(table: pl.DataFrame) -> pl.DataFrame:
    """The behaviour table as the UI shows it inline: narrow (the UI gives a metadata value
    about 500 pixels), Δ pass@1 with its interval in one cell, names that can wrap; every
    column is in the CSV."""
    delta = ["" if v is None else with_interval(f"{v:+.2f}", lo, hi, signed=True)
             for v, lo, hi in
             table.select("Δ pass@1", "Δ pass@1 low", "Δ pass@1 high").iter_rows()]
    return table.select(
        pl.col("row").str.replace_all("/", " / ", literal=True).alias("adapter"), "cell",
        "pass@1", pl.Series("Δ pass@1", delta, pl.String), "Δ mean_tokens", "Δ answer_rate")


def behaviour_asset(task: str, experiments: list[Experiment]) -> dg.AssetsDefinition:
    ins = eval_report_ins(task, experiments)

    @dg.asset(key=[task, "behaviour"], group_name=task, ins=ins, io_manager_key="parquet_io",
              kinds={"polars", "parquet"}, metadata=schema_metadata("behaviour"),
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
        png = _heatmaps(table, out / "behaviour.png",
                        f"{task}: change from the base model, per eval cell")
        metadata: dict[str, object] = {
            "table": frame_table(_shown(table), max_rows=500),
            "figure": image(png, "Δ pass@1 and Δ length per adapter and cell"),
            "csv": dg.MetadataValue.path(str(out / "behaviour.csv")),
        }
        if profile.policy.model == EMBEDDED_MODEL and task == "chain_sum":
            styles = style_table(reports["base"], runs, detect_style)
            atomic_write_csv(styles, out / "styles.csv")
            metadata["styles"] = frame_table(styles, max_rows=1000)
            metadata["styles csv"] = dg.MetadataValue.path(str(out / "styles.csv"))
            figure = _style_shift(styles, out / "styles.png",
                                  f"{task}: change in solution-style share from the base "
                                  "model (number: the style's accuracy %)")
            metadata["styles figure"] = image(figure, "style shift per adapter and cell")
            context.log.info(f"solution styles per cell written to {out / 'styles.csv'}")
        return frame_output(table, metadata)

    return behaviour
