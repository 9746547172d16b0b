"""``<task>/results_table``: the paper's method x scorer table (Tables 1, 2, 3, 7) from the
eval reports, and ``<task>/{rank_weight_ablation,rrhf_variants,dpo_beta_sweep}``: the sweeps
(Figure 6, Tables 8, 9). CSV and Markdown on disk and in the UI, with a figure each; each
names its eval set (CSV column ``eval_set``, the Markdown file's first line, metadata
``eval_set``), since tables over different eval sets are not comparable.
"""

import json
from pathlib import Path

import dagster as dg
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from assets._adapter_files import adapter_dir
from assets._metadata import eval_report_ins, frame_output, image, save_figure, text_table
from assets.selection import selection_key
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.atomic import atomic_write_csv, atomic_write_text
from saturated_dag.evaluation import per_question_results
from saturated_dag.experiments import SWEEP_TITLES, Experiment, SweepRow
from saturated_dag.result_tables import (
    display_rows,
    eval_set_caption,
    holm_column,
    results_table,
    significant_after_holm,
    sweep_table,
    to_markdown,
)
from saturated_dag.schemas import schema, sweep_schema_name
from saturated_dag.scorers.judges import JUDGES_ARE_COPIES, judges_are_copies
from saturated_dag.selection import chosen
from saturated_dag.tasks import eval_set_name


def table_metadata(frame: pl.DataFrame, metric: str = "pass@1") -> dg.TableMetadataValue:
    """One metric of the table inline in the UI: every value rounded, its interval beside it,
    the best per split marked ★, its Δ to the base model with the paired interval, * when that
    excludes 0.

    Narrower than the Markdown file, since the UI gives a metadata value about 500 pixels:
    one metric per table (``metric_tables``), split, method and scorer (or a sweep's setting)
    one ``run`` column, a sweep's kept epoch, the adapter's name left to the CSV and Markdown."""
    headers, rows = display_rows(frame)
    kept = [*(["epochs"] if "epochs" in headers else []), metric, f"Δ {metric}",
            *([holm_column(metric)] if holm_column(metric) in headers else [])]
    at = [headers.index(c) for c in kept]
    shown = [[_label(named), *(row[i] for i in at)]
             for named, row in zip(frame.iter_rows(named=True), rows, strict=True)]
    notes = {"run": "split · method · scorer (a sweep: split · setting)",
             "epochs": "the epoch kept (best validation pass@1)",
             metric: "% with its 95% interval; ★ the best of its split",
             f"Δ {metric}": "points against the base model, with the paired 95% interval; * "
                            "when the interval excludes 0, † when it also holds after Holm's "
                            "correction over the table's rows",
             holm_column(metric): "Holm-adjusted p of Δ = 0 over the table's rows "
                                  "(family-wise; docs/statistics.md)"}
    return text_table(["run", *kept], shown, notes)


def metric_tables(frame: pl.DataFrame) -> dict[str, dg.TableMetadataValue]:
    """``table`` (pass@1) and ``pass@k table``: the results as the UI shows them inline."""
    metrics = [c for c in frame.columns if c.startswith("pass@") and " " not in c]
    return {("table" if m == "pass@1" else f"{m} table"): table_metadata(frame, m)
            for m in metrics}


def _label(row: dict) -> str:
    """A row's ``run``: split · method · scorer, or split · setting (the base model's split
    is ``-``, left out)."""
    names = ("split", "run") if "run" in row else ("split", "method", "scorer")
    return " · ".join(str(row[c]) for c in names if row[c] not in (None, "", "-"))


def headline(frame: pl.DataFrame) -> dict[str, object]:
    """Plain numbers the UI's Plots view charts across materialisations (nightly replicates
    make them a curve): the base model's pass@1 and the largest Δ pass@1 with their 95%
    intervals, rounded to two decimals, and how many rows' Δ excludes 0."""
    base = frame.row(0, named=True)
    out: dict[str, object] = {f"base pass@1{end}": round(base[f"pass@1{end}"], 2)
                              for end in ("", " low", " high") if f"pass@1{end}" in base}
    runs = frame.slice(1)
    if runs.height:
        top = runs.row(int(runs["Δ pass@1"].arg_max() or 0), named=True)
        out.update({f"best Δ pass@1{end}": round(top[f"Δ pass@1{end}"], 2)
                    for end in ("", " low", " high") if f"Δ pass@1{end}" in top})
        out["best Δ pass@1 row"] = _label(top)
        if "Δ pass@1 excludes 0" in runs.columns:
            out["rows whose Δ pass@1 excludes 0"] = int(runs["Δ pass@1 excludes 0"].sum())
            out["rows whose Δ pass@1 holds after Holm"] = sum(
                significant_after_holm(runs, "Δ pass@1"))
    return out


def _plot(frame: pl.DataFrame, path: Path, title: str) -> Path:
    labels = [f"{r['split']}: {r['method']} {r['scorer']}".strip() if r["split"] != "-"
              else r["method"] for r in frame.iter_rows(named=True)]
    fig, ax = plt.subplots(figsize=(9, 0.35 * frame.height + 1.5))
    values = frame["pass@1"].to_list()
    xerr = None
    if "pass@1 low" in frame.columns:  # the 95% intervals (docs/statistics.md)
        xerr = [[v - lo for v, lo in zip(values, frame["pass@1 low"], strict=True)],
                [hi - v for v, hi in zip(values, frame["pass@1 high"], strict=True)]]
    ax.barh(range(frame.height), values, xerr=xerr, capsize=2, color="tab:blue")
    ax.set_yticks(range(frame.height), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(frame["pass@1"][0], color="red", linestyle="--", label="base model")
    ax.set_xlabel("pass@1 (%), with 95% intervals" if xerr else "pass@1 (%)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)  # off the bars
    return save_figure(fig, path)


def results_table_asset(task: str, experiments: list[Experiment]) -> dg.AssetsDefinition:
    ins = eval_report_ins(task, experiments)

    @dg.asset(key=[task, "results_table"], group_name=task, ins=ins,
              io_manager_key="parquet_io", kinds={"polars", "parquet"},
              metadata=schema_metadata("results_table"),
              description=f"{task}: pass@1 / pass@8 of every adapter against the base model.")
    def results(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                **reports: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        k = profile.sampling.n
        counts = {name: per_question_results(samples) for name, samples in reports.items()}
        runs = {(e.split, e.method, e.scorer): counts[f"run_{i}"]
                for i, e in enumerate(experiments)}
        eval_set = eval_set_name(profile, task, counts["base"].height)
        frame = results_table(counts["base"], runs, k=k, eval_set=eval_set)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(frame, out / "results_table.csv")
        markdown = to_markdown(frame)
        caption = eval_set_caption(frame)
        atomic_write_text(out / "results_table.md", f"{caption}\n\n{markdown}\n")
        png = _plot(frame, out / "results_table.png", f"{task}: pass@1 by method and scorer")
        copies = judges_are_copies(profile.policy.model, profile.judges.strong.kind)
        if copies:
            caption += f" Self-judge and strong-judge rows: {JUDGES_ARE_COPIES}."
        context.log.info(f"{caption}\n{markdown}")
        return frame_output(frame, {
            **metric_tables(frame),
            "about the table": dg.MetadataValue.md(caption),
            **headline(frame),
            "figure": image(png, "pass@1 by method and scorer"),
            "eval_set": eval_set,
            "policy": profile.policy.model, "profile": profile.name,
            "csv": dg.MetadataValue.path(str(out / "results_table.csv")),
            "markdown": dg.MetadataValue.path(str(out / "results_table.md")),
        })

    return results


SWEEP_ASSETS = {"rank_weight": "rank_weight_ablation", "rrhf_variants": "rrhf_variants",
                "dpo_beta": "dpo_beta_sweep"}


def _plot_lambda(frame: pl.DataFrame, k: int, path: Path, title: str) -> Path:
    """Figure 6: pass@1 and pass@k against λ on a log axis, λ=0 drawn at the left edge."""
    rows = frame.filter(pl.col("split") != "-").sort("lambda", maintain_order=True)
    lambdas = rows["lambda"].to_list()
    positive = [v for v in lambdas if v > 0]
    zero_at = min(positive) / 3 if positive else 1e-3
    xs = [v if v > 0 else zero_at for v in lambdas]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, col, color in ((axes[0], "pass@1", "#2C7BB6"), (axes[1], f"pass@{k}", "#DD8452")):
        ax.plot(xs, rows[col].to_list(), marker="o", color=color)
        ax.axhline(frame[col][0], color="gray", linestyle="--", label="base model")
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{v:g}" for v in lambdas])
        ax.minorticks_off()
        ax.set_xlabel("rank loss weight λ")
        ax.set_ylabel(f"{col} (%)")
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, path)


def _best_epoch(output_dir: str, task: str, exp: Experiment) -> int | None:
    record = adapter_dir(output_dir, task, exp) / "training_config.json"
    if not record.is_file():
        return None
    return json.loads(record.read_text()).get("best_epoch")


def sweep_table_asset(task: str, sweep: str, rows: list[SweepRow],
                      configurations: dict[Experiment, list[Experiment]] | None = None
                      ) -> dg.AssetsDefinition:
    """One sweep's table (and, for λ, Figure 6) from its adapters' eval reports.

    ``configurations``: each row's cell's configurations (the selection grid over the settings
    the row does not fix). A row with several reads its selection, and its ``adapter`` and
    ``epochs`` columns name the chosen one (``<split>/selection/<cell>``); a row with one names
    that one (not the cell: a row pinning the profile's own β is cell ``..._beta0.1`` of
    adapter ``dpo_self_judge``).
    """
    configurations = configurations or {}
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    ins.update({f"row_{i}": dg.AssetIn(key=[task, r.experiment.split, "eval",
                                             r.experiment.name])
                for i, r in enumerate(rows)})
    ins.update({f"selection_{i}": dg.AssetIn(key=selection_key(task, r.experiment))
                for i, r in enumerate(rows) if len(configurations.get(r.experiment, ())) > 1})
    name = SWEEP_ASSETS[sweep]
    title = SWEEP_TITLES[sweep]

    @dg.asset(key=[task, name], group_name=task, ins=ins, io_manager_key="parquet_io",
              kinds={"polars", "parquet"},
              metadata=schema_metadata(sweep_schema_name(sweep)),
              description=f"{task}: {title}, on the {rows[0].experiment.split} split.")
    def table(context: dg.AssetExecutionContext, experiment: ExperimentResource,
              **reports: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        k = profile.sampling.n
        split = rows[0].experiment.split
        counts = {name: per_question_results(samples) for name, samples in reports.items()
                  if not name.startswith("selection_")}
        eval_set = eval_set_name(profile, task, counts["base"].height)
        entries = []
        for i, row in enumerate(rows):
            # the configuration the row's cell chose, or its only one (a row that pins the
            # profile's own value is a cell of its own whose adapter keeps its plain name)
            adapter = next(iter(configurations.get(row.experiment, [])), row.experiment)
            if f"selection_{i}" in reports:
                picked = chosen(reports[f"selection_{i}"])
                adapter = next(c for c in configurations[row.experiment] if c.name == picked)
            settings = {**row.settings,
                        "epochs": _best_epoch(experiment.output_dir, task, adapter),
                        "adapter": adapter.name}
            entries.append((row.label, settings, counts[f"row_{i}"]))
        frame = sweep_table(counts["base"], split, entries, k=k, eval_set=eval_set,
                            setting_dtypes=schema(sweep_schema_name(sweep), k=k))
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(frame, out / f"{name}.csv")
        markdown = to_markdown(frame)
        caption = eval_set_caption(frame)
        atomic_write_text(out / f"{name}.md", f"{title}\n{caption}\n\n{markdown}\n")
        context.log.info(f"{title}\n{caption}\n{markdown}")
        metadata: dict[str, object] = {
            **metric_tables(frame),
            "about the table": dg.MetadataValue.md(f"{title}. {caption}"),
            **headline(frame),
        }
        if sweep == "rank_weight":
            png = _plot_lambda(frame, k, out / f"{name}.png", f"{task}: {title}")
            metadata["figure"] = image(png, title)
        else:
            labels = [str(r) for r in frame["run"]]
            relabelled = frame.with_columns(pl.Series("method", labels), scorer=pl.lit(""))
            metadata["figure"] = image(
                _plot(relabelled, out / f"{name}.png",
                      f"{task}: {title}"), title)
        metadata.update({"eval_set": eval_set,
                         "csv": dg.MetadataValue.path(str(out / f"{name}.csv")),
                         "markdown": dg.MetadataValue.path(str(out / f"{name}.md"))})
        return frame_output(frame, metadata)

    return table
