"""``<task>/<split>/selection/<cell>``: the paper's selection protocol (App. B) for one cell.

A cell with more than one configuration (``training.selection``) trains
each of them (each over ``training.replicates`` seeds); this asset reads their validation
pass@1 and chooses the best (``saturated_dag.training.selection``). The cell's eval report evaluates
the chosen configuration, so the main tables report it. The metadata leads with ``summary``
(the choice and its margin; ``result_tables.selection_summary``), then its configurations with the
winner marked, narrowed to what tells the configurations apart (``shown``; every column is in the
Parquet).
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_curves_png, adapter_dir, adapter_key
from assets._metadata import frame_output, frame_table, image, summary_entry
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.experiments import Adapter, Cell, Configuration, TaskPlan
from saturated_dag.infra.atomic import read_proven_parquet
from saturated_dag.reporting.labels import scientific
from saturated_dag.reporting.plots import cell_overlay
from saturated_dag.reporting.result_tables import selection_summary
from saturated_dag.reporting.runs_table import INLINE_ROWS
from saturated_dag.training.folders import RESULT_FILE, VALIDATION_FILE
from saturated_dag.training.selection import SETTINGS, Trained, chosen, selection_table

SETTING_NAMES = {"learning_rate": "η", "epochs": "max epochs",
                 "batch_size": "batch size", "dpo_loss_type": "DPO loss", "dpo_beta": "β",
                 "dpo_nll_weight": "NLL weight",
                 "rrhf_rank_weight": "λ"}
"""The settings a selection varies, as the inline table heads them."""


def selection_key(task: str, cell: Cell) -> dg.AssetKey:
    return dg.AssetKey([task, cell.split, "selection", cell.name])


def shown(table: pl.DataFrame) -> dg.TableMetadataValue:
    """The configurations inline, narrow enough for the UI's metadata panel (the UI
    wraps no header, so headers are short): each configuration by its key, the
    learning rate always (``2e-05``: two decimals would show 0), other settings only where
    they differ between configurations, the validation pass@1 with two decimals, the winner
    ticked. The seeds, kept epochs and the selection rule's margins are in the asset's
    Parquet."""
    varying = [s for s in SETTINGS if s != "learning_rate"
               and table[s].drop_nulls().n_unique() > 1]
    frame = table.select(
        "configuration",
        pl.col("learning_rate").alias(SETTING_NAMES["learning_rate"]),
        *(pl.col(s).alias(SETTING_NAMES[s]) for s in varying),
        pl.col("validation pass@1").alias("val. pass@1"),
        pl.when(pl.col("chosen")).then(pl.lit("✓")).otherwise(pl.lit("")).alias("chosen"))
    return frame_table(frame, max_rows=INLINE_ROWS,
                       formats={"η": scientific, "β": "g", "λ": "g"})


def same_adapters(run: TaskPlan, cell: Cell,
                  trained: dict[Configuration, list[Adapter]]) -> None:
    """Refuse a step whose run's plan (``ExperimentResource.plan``) trains other adapters for
    ``cell`` than the graph holds (``trained``): the configurations and the training seeds
    shape the asset graph, so they are set in the code location's profile, not in a run's
    config overrides."""
    wanted = run.trained.get(cell, {})
    if wanted != trained:
        raise dg.Failure(
            f"this run's settings give {cell.split}/{cell.name} the adapters "
            f"{sorted(s.name for seeds in wanted.values() for s in seeds)}, but the code "
            f"location's graph has {sorted(s.name for seeds in trained.values() for s in seeds)}"
            ": training.selection, training.replicates, the splits a task can train and "
            "data_seeds shape the graph; set them in the location's profile "
            "(SATURATED_DAG_PROFILE), not in run config overrides")


def _record(folder: Path) -> dict:
    """A trained adapter's ``result.json``, read once for both its validation and its curves."""
    record = folder / RESULT_FILE
    if not record.is_file():
        raise dg.Failure(f"adapter {folder} has no result.json: materialise it first")
    return json.loads(record.read_text())


def _validation(folder: Path, result: dict) -> tuple[float, int]:
    """A trained adapter's validation pass@1 (fraction) at its kept epoch, and that epoch."""
    best = int(result["best_epoch"])
    values = [e.get("val_pass@1") for e in result["epochs"] if e["epoch"] == best]
    if not values or values[0] is None:
        raise dg.Failure(f"adapter {folder} recorded no validation pass@1 for its kept epoch "
                         f"{best}: selection needs one (App. B)")
    return float(values[0]), best


def _per_question(folder: Path) -> pl.DataFrame:
    """A trained adapter's per-question validation results at its kept epoch."""
    path = folder / VALIDATION_FILE
    if not path.is_file():
        raise dg.Failure(f"adapter {folder} has no {VALIDATION_FILE} (trained by older code): "
                         "the one-SE rule (training.selection.rule) pairs per-question "
                         "validation results; re-materialise the adapter")
    return read_proven_parquet(path, "re-materialise the adapter (it is trained again)")


def _overlay(output_dir: str, task: str, cell: Cell,
             records: dict[str, dict[str, dict]], winner: str) -> Path:
    """One figure of the cell's trainings (``plots.cell_overlay``; ``records``: per
    configuration, each of its adapters' ``result.json`` by partition key), the partitions of
    the chosen configuration (``winner``) marked."""
    picked = list(records[winner])
    runs = {key: result for by_key in records.values() for key, result in by_key.items()}
    path = adapter_curves_png(output_dir, task, cell).with_name(f"{cell.name}_overlay.png")
    png, _ = cell_overlay(runs, picked, path, f"{task} {cell.split}: {cell.name}")
    return png


def selection_asset(task: str, cell: Cell,
                    trained: dict[Configuration, list[Adapter]]) -> dg.AssetsDefinition:
    """``trained``: each configuration of the cell (configuration order) and its training-seed
    replicates (``experiments.configurations``, ``experiments.replicates``)."""

    @dg.asset(key=selection_key(task, cell), group_name=f"{task}_{cell.split}",
              io_manager_key="parquet_io", kinds={"selection", "polars", "parquet"},
              metadata=schema_metadata("selection", report=True),
              deps=[adapter_key(task, cell)],
              description=f"Selection of {cell.name} ({cell.split}): each configuration's "
              "validation pass@1 over its training seeds, one chosen by "
              "training.selection.rule (App. B's best, or the one-SE rule).")
    def selection(context: dg.AssetExecutionContext,
                  experiment: ExperimentResource) -> dg.Output[pl.DataFrame]:
        profile, run = experiment.settings, experiment.plan[task]
        same_adapters(run, cell, trained)
        rule = profile.training.selection.rule
        partition_keys, keys = run.partition_keys[cell], run.configuration_keys[cell]
        rows, records = [], {}
        for config, seeds in trained.items():
            folders = [adapter_dir(experiment.output_dir, task, seeded) for seeded in seeds]
            results = [_record(folder) for folder in folders]
            records[config.name] = {partition_keys[seeded]: result
                                    for seeded, result in zip(seeds, results, strict=True)}
            runs = [_validation(f, r) for f, r in zip(folders, results, strict=True)]
            effective = config.training(profile.training)
            rows.append(Trained(config.name, {s: getattr(effective, s) for s in SETTINGS},
                                [v for v, _ in runs], [e for _, e in runs],
                                [_per_question(f) for f in folders] if rule == "one_se"
                                else (), configuration=keys[config.name]))
        table = selection_table(rows, rule)
        winner = chosen(table)
        overlay = _overlay(experiment.output_dir, task, cell, records, winner)
        context.log.info(f"{cell.split}/{cell.name}: chose {keys[winner]} (adapter {winner}) of "
                         f"{table.height} configurations by validation pass@1 ({rule} rule, "
                         "training.selection.rule)")
        return frame_output(table, {
            "summary": summary_entry(selection_summary(table)),
            "table": shown(table),
            "chosen": keys[winner],
            "configurations": table.height,
            "training curves (every configuration)": image(
                overlay, "loss per logged step and validation pass@1 per epoch of every "
                "adapter by its partition key, the chosen configuration's in black"),
        })

    return selection
