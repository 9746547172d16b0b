"""``<task>/runs_table``: one row per trained adapter (``saturated_dag.reporting.runs_table``),
and, with ``tracking.mlflow`` on, each row as an MLflow run
(``saturated_dag.reporting.tracking``).

Its inputs are every eval report of the task (the base model's and each cell's) and every
cell's selection, so it runs last, once the task's tables are due; each adapter's
``training_config.json`` is read from its folder. Metadata: a short summary first (which says
how many rows each split leaves out), then one table per split of at most ``INLINE_ROWS`` rows
(``inline_tables``: method, scorer, β, λ, η, validation pass@1, Δ with its interval), then
where the MLflow runs went. The whole frame is also ``<output dir>/<task>/runs_table.csv``.

With tracking on, the MLflow store is opened first, before any row is computed, and a store
that cannot be opened fails the step naming ``tracking.tracking_uri``, its value and why (a
password in it shown as ``***``, as in the log line and the metadata). The
files are written last, once every row is computed (and logged): a failure leaves
``runs_table.csv`` as it was.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir
from assets._metadata import frame_output, frame_table, output_file
from assets.selection import same_adapters, selection_key
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.experiments import Adapter, Cell, Configuration
from saturated_dag.infra.atomic import atomic_write_csv
from saturated_dag.reporting.runs_table import (
    INLINE_ROWS,
    cell_key,
    chosen_configurations,
    inline_tables,
    read_record,
    runs_table,
    summary,
    task_adapters,
)
from saturated_dag.reporting.tracking import (
    Logged,
    Source,
    TrackingError,
    TrackingStore,
    git_state,
    log_rows,
    open_tracking,
)
from saturated_dag.training.selection import chosen


def _open(experiment: ExperimentResource) -> TrackingStore | None:
    """The profile's MLflow store, opened at the start of the step (None: tracking off); one
    that cannot be opened fails the asset, naming the setting, its value and why."""
    tracking = experiment.settings.tracking
    if not tracking.mlflow:
        return None
    try:
        return open_tracking(tracking, experiment.output_dir)
    except TrackingError as err:
        raise dg.Failure(str(err)) from None


def _track(context: dg.AssetExecutionContext, experiment: ExperimentResource,
           store: TrackingStore, frame: pl.DataFrame) -> Logged:
    """Log the rows to the opened store; a failure to log fails the asset."""
    profile = experiment.settings
    commit, dirty = git_state()
    source = Source(profile.name, experiment.location.output_path, commit, dirty,
                    {"saturated_dag.dagster_run": context.run_id})
    try:
        logged = log_rows(frame.to_dicts(), store, store.experiment, source)
    except TrackingError as err:
        raise dg.Failure(str(err)) from None
    context.log.info(f"MLflow {store.shown} (experiment {store.experiment!r}): "
                     f"{logged.line()}")
    return logged


def runs_table_asset(task: str, cells: list[Cell],
                     trained: dict[Cell, dict[Configuration, list[Adapter]]]
                     ) -> dg.AssetsDefinition:
    """``trained``: each cell's configurations and their seeds (``experiments.cell_adapters``),
    the graph's own; a cell with several reads its selection."""
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    ins.update({f"report_{i}": dg.AssetIn(key=[task, c.split, "eval", c.name])
                for i, c in enumerate(cells)})
    ins.update({f"selection_{i}": dg.AssetIn(key=selection_key(task, c))
                for i, c in enumerate(cells) if len(trained[c]) > 1})

    @dg.asset(key=[task, "runs_table"], group_name=task, ins=ins, io_manager_key="parquet_io",
              kinds={"polars", "parquet"}, metadata=schema_metadata("runs_table", report=True),
              description=f"{task}: every trained adapter (each configuration x seed of every "
              "cell and sweep row) with its settings, validation pass@1, whether it was "
              "chosen and its eval pass@1 / pass@k with Δ to the base model; logged to MLflow "
              "when tracking.mlflow is on.")
    def table(context: dg.AssetExecutionContext, experiment: ExperimentResource,
              **inputs: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        profile, run = experiment.settings, experiment.plan[task]
        for cell in cells:
            same_adapters(run, cell, trained[cell])
        store = _open(experiment)  # before any row: a bad store fails at once
        adapters = task_adapters(run)
        folders = {a.adapter: adapter_dir(experiment.output_dir, task, a.adapter)
                   for a in adapters}  # by adapter: splits share names
        records = {exp: read_record(folder) for exp, folder in folders.items()}
        missing = sorted(f"{exp.split}/{exp.name}" for exp, record in records.items()
                         if record is None)
        if missing:
            context.log.warning(f"{len(missing)} adapter(s) have no training_config.json "
                                f"(their rows show the planned settings): {missing[:5]}")
        selections = {cell_key(c): chosen(inputs[f"selection_{i}"])
                      for i, c in enumerate(cells) if f"selection_{i}" in inputs}
        reports = {cell_key(c): per_question_results(inputs[f"report_{i}"])
                   for i, c in enumerate(cells)}
        base = per_question_results(inputs["base"])
        frame = runs_table(profile, task, adapters, records,
                           {exp: str(folder) for exp, folder in folders.items()},
                           chosen_configurations(run, adapters, selections), reports, base,
                           run.questions.eval_set_name(base["question_id"].n_unique()))
        logged = None if store is None else _track(context, experiment, store, frame)
        # every row computed (and logged): only now the files
        tables = Path(experiment.output_dir) / task
        tables.mkdir(parents=True, exist_ok=True)
        csv = atomic_write_csv(frame, tables / "runs_table.csv")
        tracking = profile.tracking
        inline = inline_tables(frame)
        metadata: dict[str, object] = {
            "summary": dg.MetadataValue.md(summary(
                frame, task, logged and logged.uri,
                inline={split: (rows.height, total) for split, (rows, total) in inline.items()})),
            **{f"runs: {split}": frame_table(rows, max_rows=INLINE_ROWS)
               for split, (rows, _) in inline.items()},
            "adapters": frame.height,
            "chosen": int(frame["chosen"].sum()),
            "evaluated": int(frame["pass@1"].is_not_null().sum()),
            "csv": output_file(csv, experiment.output_dir),
        }
        if logged is not None:
            metadata.update({"mlflow_uri": logged.uri,
                             "mlflow_experiment": tracking.experiment,
                             "mlflow_runs": logged.line()})
        return frame_output(frame, metadata)

    return table
