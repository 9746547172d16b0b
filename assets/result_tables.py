"""``<task>/results_table``: the paper's method x scorer table (Tables 1, 2, 7) from the eval
reports, as CSV and Markdown, with a bar chart.
"""

from pathlib import Path

import dagster as dg
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from assets._metadata import image
from resources import ExperimentResource
from saturated_dag.experiments import Experiment
from saturated_dag.result_tables import results_table, to_markdown

CODE_VERSION = "1"


def _plot(frame: pd.DataFrame, path: Path, title: str) -> Path:
    labels = [f"{r.split}: {r.method} {r.scorer}".strip() if r.split != "-" else r.method
              for r in frame.itertuples()]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(frame) + 1.5))
    ax.barh(range(len(frame)), frame["pass@1"], color="tab:blue")
    ax.set_yticks(range(len(frame)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(frame["pass@1"].iloc[0], color="red", linestyle="--", label="base model")
    ax.set_xlabel("pass@1 (%)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def results_table_asset(task: str, experiments: list[Experiment]) -> dg.AssetsDefinition:
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    ins.update({f"run_{i}": dg.AssetIn(key=[task, e.split, "eval", e.name])
                for i, e in enumerate(experiments)})

    @dg.asset(key=[task, "results_table"], group_name=task, ins=ins,
              io_manager_key="parquet_io", code_version=CODE_VERSION, kinds={"parquet"},
              description=f"{task}: pass@1 / pass@8 of every adapter against the base model.")
    def results(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                **reports: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        k = experiment.settings.sampling.n
        runs = {(e.split, e.method, e.scorer): reports[f"run_{i}"]
                for i, e in enumerate(experiments)}
        frame = results_table(reports["base"], runs, k=k)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out / "results_table.csv", index=False)
        markdown = to_markdown(frame)
        (out / "results_table.md").write_text(markdown + "\n")
        png = _plot(frame, out / "results_table.png", f"{task}: pass@1 by method and scorer")
        context.log.info("\n" + markdown)
        return dg.Output(frame, metadata={
            "table": dg.MetadataValue.md(markdown),
            "csv": dg.MetadataValue.path(str(out / "results_table.csv")),
            "figure": image(png, "pass@1 by method and scorer"),
        })

    return results
