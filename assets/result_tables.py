"""``<task>/results_table``: the paper's method x scorer table (Tables 1, 2, 3, 7) from the
eval reports, and ``<task>/{rank_weight_ablation,rrhf_variants,dpo_beta_sweep}``: the sweeps
(Figure 6, Tables 8, 9). CSV and Markdown on disk and in the UI, with a figure each; each
names its eval set (CSV column ``eval_set``, the Markdown file's first line, metadata
``eval_set``), since tables over different eval sets are not comparable.

The metadata leads with the answer: ``summary`` (how many rows lie below and above the base
model by their paired intervals, the best row, the sample; ``result_tables.summary``), then
the figure (a forest plot of Δ with paired intervals; for λ, the values against λ with their
intervals), then the tables, then their notes and files. The figure is one entry (a link the
UI shows on one line), so it comes before the tables: it is then on the page's first screen.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir
from assets._metadata import (
    eval_report_ins,
    frame_output,
    image,
    output_file,
    summary_entry,
    text_table,
)
from assets.selection import selection_key
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis.testbed import VERDICTS_FILE, unvalidated_note
from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.experiments import SWEEP_TITLES, Adapter, Cell, Configuration, SweepRow
from saturated_dag.infra.atomic import atomic_write_csv, atomic_write_text
from saturated_dag.reporting.labels import sweep_row_label
from saturated_dag.reporting.plots import forest_plot, sweep_plot
from saturated_dag.reporting.result_tables import (
    NOT_APPLICABLE,
    count_rule,
    display_rows,
    eval_set_caption,
    holm_column,
    results_table,
    row_label,
    significant_after_holm,
    summary,
    sweep_table,
    text_forest,
    to_markdown,
)
from saturated_dag.schemas import schema, sweep_schema_name
from saturated_dag.scorers.judges import JUDGES_ARE_COPIES, judges_are_copies
from saturated_dag.training.selection import chosen

FIGURE_NOTE = ("Figure (the entry's link): Δ to the base model with its 95% paired interval, "
               "one line per row; filled red or blue where the interval excludes 0, hollow grey "
               "where it spans 0, † where it also holds after Holm's correction. An SVG for print "
               "is beside the PNG (`figure (SVG)`).")


INLINE_HOLM = "Holm p"
"""The inline table's header of Holm's adjusted p of its one metric's Δ."""


def table_metadata(frame: pl.DataFrame, metric: str = "pass@1") -> dg.TableMetadataValue:
    """One metric of the table inline in the UI: every value rounded, its interval beside it,
    the best per split marked ★, its Δ to the base model with the paired interval, * when that
    excludes 0.

    Narrower than the Markdown file, since the UI gives a metadata value little width:
    one metric per table (``metric_tables``), split, method and scorer (or a sweep's setting)
    one ``run`` column, a sweep's kept epoch, the adapter's name left to the CSV and Markdown,
    and Holm's adjusted p headed ``Holm p`` (the files' ``Holm p (Δ pass@1)``; the table holds
    one metric). Even so the metadata table is about as wide as the UI's metadata panel; what
    widens it is not known."""
    holm = holm_column(metric)
    headers, rows = display_rows(frame)
    kept = [*(["epochs"] if "epochs" in headers else []), metric, f"Δ {metric}",
            *([holm_column(metric)] if holm_column(metric) in headers else [])]
    at = [headers.index(c) for c in kept]
    shown = [[row_label(named), *(row[i] for i in at)]
             for named, row in zip(frame.iter_rows(named=True), rows, strict=True)]
    notes = {"run": "split · method · scorer (a sweep: split · setting)",
             "epochs": "the epoch kept (best validation pass@1)",
             metric: "% with its 95% interval; ★ the best of its split",
             f"Δ {metric}": "points against the base model, with the paired 95% interval; * "
                            "when the interval excludes 0, † when it also holds after Holm's "
                            f"correction over the table's rows; {NOT_APPLICABLE} on the base "
                            "model (0 by construction)",
             INLINE_HOLM: f"Holm-adjusted p of Δ {metric} = 0 over the table's rows "
                          f"(family-wise; the files' {holm}; docs/statistics.md)"}
    return text_table(["run", *(INLINE_HOLM if c == holm else c for c in kept)], shown, notes)


def forest_entry(frame: pl.DataFrame) -> dict[str, dg.TableMetadataValue]:
    """``forest plot``: Δ pass@1 per row against the base model drawn in characters
    (``result_tables.text_forest``), the one figure the UI shows inline on the first screen;
    the PNG/SVG forest plot of Δ pass@1 and Δ pass@k is the ``figure`` entry's link."""
    caption, bars = text_forest(frame)
    if not bars:
        return {}
    header = "Δ pass@1, 95% paired interval (│ = 0)"
    return {"forest plot": text_table(["run", header], bars, {header: caption})}


def _metrics(frame: pl.DataFrame) -> list[str]:
    """The table's metric columns: pass@1 and pass@k."""
    return [c for c in frame.columns if c.startswith("pass@") and " " not in c]


def metric_tables(frame: pl.DataFrame) -> dict[str, dg.TableMetadataValue]:
    """``table`` (pass@1) and ``pass@k table``: the results as the UI shows them inline."""
    return {("table" if m == "pass@1" else f"{m} table"): table_metadata(frame, m)
            for m in _metrics(frame)}


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
        out["best Δ pass@1 row"] = row_label(top)
        if "Δ pass@1 excludes 0" in runs.columns:
            out["rows whose Δ pass@1 excludes 0"] = int(runs["Δ pass@1 excludes 0"].sum())
            out["rows whose Δ pass@1 holds after Holm"] = sum(
                significant_after_holm(runs, "Δ pass@1"))
    return out


def results_table_asset(task: str, experiments: list[Cell],
                        testbed: bool = False) -> dg.AssetsDefinition:
    """The main table. ``testbed``: the same run has the testbed's analysis
    (``chain_sum/testbed_validation``), which runs first, so the caption names each method
    shown whose positive control failed there (``testbed.unvalidated_note``)."""
    ins = eval_report_ins(task, experiments)
    after = {"deps": [["chain_sum", "testbed_validation"]]} if testbed else {}

    @dg.asset(key=[task, "results_table"], group_name=task, ins=ins, **after,
              io_manager_key="parquet_io", kinds={"polars", "parquet"},
              metadata=schema_metadata("results_table", report=True),
              description=f"{task}: pass@1 / pass@8 of every adapter against the base model.")
    def results(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                **reports: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        k = profile.sampling.n
        counts = {name: per_question_results(samples) for name, samples in reports.items()}
        runs = {(e.split, e.method, e.scorer): counts[f"run_{i}"]
                for i, e in enumerate(experiments)}
        eval_set = experiment.plan[task].questions.eval_set_name(
            counts["base"]["question_id"].n_unique())
        frame = results_table(counts["base"], runs, k=k, eval_set=eval_set)
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(frame, out / "results_table.csv")
        markdown = to_markdown(frame)
        caption = eval_set_caption(frame)
        verdicts = out / VERDICTS_FILE
        if testbed and verdicts.is_file():
            caption += unvalidated_note(json.loads(verdicts.read_text(encoding="utf-8"))[
                "verdicts"], set(frame["method"].to_list()))
        atomic_write_text(out / "results_table.md", f"{caption}\n\n{markdown}\n")
        png, svg = forest_plot(frame, _metrics(frame), out / "results_table.png",
                               f"{task}: Δ to the base model by method and scorer")
        copies = judges_are_copies(profile.policy.model, profile.judges.strong.kind)
        if copies:
            caption += f" Self-judge and strong-judge rows: {JUDGES_ARE_COPIES}."
        context.log.info(f"{caption}\n{markdown}")
        return frame_output(frame, {
            "summary": summary_entry(summary(frame, samples=k)),
            **forest_entry(frame),
            "figure": image(png, "Δ pass@1 and Δ pass@k to the base model, 95% paired "
                                 "intervals"),
            **metric_tables(frame),
            "about the table": dg.MetadataValue.md(f"{caption} {count_rule(frame)}"),
            "about the figure": dg.MetadataValue.md(FIGURE_NOTE),
            **headline(frame),
            "eval_set": eval_set,
            "policy": profile.policy.model, "profile": profile.name,
            "csv": output_file(out / "results_table.csv", experiment.output_dir),
            "markdown": output_file(out / "results_table.md", experiment.output_dir),
            "figure (SVG)": output_file(svg, experiment.output_dir),
        })

    return results


SWEEP_ASSETS = {"rank_weight": "rank_weight_ablation", "rrhf_variants": "rrhf_variants",
                "dpo_beta": "dpo_beta_sweep"}


def _best_epoch(output_dir: str, task: str, exp: Adapter) -> int | None:
    record = adapter_dir(output_dir, task, exp) / "training_config.json"
    if not record.is_file():
        return None
    return json.loads(record.read_text()).get("best_epoch")


def sweep_table_asset(task: str, sweep: str, rows: list[SweepRow],
                      configurations: dict[Configuration, list[Adapter]] | None = None
                      ) -> dg.AssetsDefinition:
    """One sweep's table (and, for λ, Figure 6) from its adapters' eval reports.

    ``configurations``: each row's cell's configurations (every combination of
    ``training.selection``'s values for the settings the row does not fix). A row with several reads
    its selection, and its ``adapter`` and ``epochs`` columns name the chosen one
    (``<split>/selection/<cell>``); a row with one names that one (not the cell: a row pinning the
    profile's own β is cell ``..._beta0.1`` of adapter ``dpo_self_judge``).
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
              metadata=schema_metadata(sweep_schema_name(sweep), report=True),
              description=f"{task}: {title}, on the {rows[0].experiment.split} split.")
    def table(context: dg.AssetExecutionContext, experiment: ExperimentResource,
              **reports: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        k = profile.sampling.n
        split = rows[0].experiment.split
        counts = {name: per_question_results(samples) for name, samples in reports.items()
                  if not name.startswith("selection_")}
        eval_set = experiment.plan[task].questions.eval_set_name(
            counts["base"]["question_id"].n_unique())
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
            entries.append((sweep_row_label(sweep, row), settings, counts[f"row_{i}"]))
        frame = sweep_table(counts["base"], split, entries, k=k, eval_set=eval_set,
                            setting_dtypes=schema(sweep_schema_name(sweep), k=k))
        out = Path(experiment.output_dir) / task
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(frame, out / f"{name}.csv")
        markdown = to_markdown(frame)
        caption = eval_set_caption(frame)
        atomic_write_text(out / f"{name}.md", f"{title}\n{caption}\n\n{markdown}\n")
        context.log.info(f"{title}\n{caption}\n{markdown}")
        if sweep == "rank_weight":  # Figure 6: the values against λ, with their intervals
            png, svg = sweep_plot(frame, "lambda", _metrics(frame), out / f"{name}.png",
                                  f"{task}: {title}", "rank loss weight λ")
            note = ("Figure (the entry's link): pass@1 and pass@k against λ with their 95% "
                    "intervals, the base model's as a dashed line and band; filled where the "
                    "row's paired Δ interval excludes 0.")
        else:
            png, svg = forest_plot(frame, _metrics(frame), out / f"{name}.png",
                                   f"{task}: {title}, Δ to the base model")
            note = FIGURE_NOTE
        metadata: dict[str, object] = {
            "summary": summary_entry(summary(frame, samples=k)),
            **forest_entry(frame),
            "figure": image(png, title),
            **metric_tables(frame),
            "about the table": dg.MetadataValue.md(f"{title}. {caption} {count_rule(frame)}"),
            "about the figure": dg.MetadataValue.md(note),
            **headline(frame),
            "eval_set": eval_set,
            "csv": output_file(out / f"{name}.csv", experiment.output_dir),
            "markdown": output_file(out / f"{name}.md", experiment.output_dir),
            "figure (SVG)": output_file(svg, experiment.output_dir),
        }
        return frame_output(frame, metadata)

    return table
