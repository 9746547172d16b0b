"""``<task>/<split>/selection/<cell>``: the paper's selection protocol (App. B) for one cell.

A cell whose selection grid (``training.selection``) has more than one configuration trains
each of them (each over ``training.replicates`` seeds); this asset reads their validation
pass@1 and chooses the best (``saturated_dag.selection``). The cell's eval report evaluates
the chosen configuration, so the main tables report it. The whole grid, with the winner
marked, is the asset's table in the UI.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir
from assets._metadata import frame_output, frame_table
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.config import Profile
from saturated_dag.experiments import Experiment, cell_adapters
from saturated_dag.selection import SETTINGS, Trained, chosen, selection_table


def selection_key(task: str, cell: Experiment) -> dg.AssetKey:
    return dg.AssetKey([task, cell.split, "selection", cell.name])


def same_adapters(profile: Profile, cell: Experiment,
                  trained: dict[Experiment, list[Experiment]]) -> None:
    """Refuse a run whose settings would train other adapters than the graph holds: the grid
    and the training seeds shape the asset graph, so they are set in the code location's
    profile, not in a run's config overrides."""
    wanted = cell_adapters(profile.training, cell, profile.sampling.n)
    if wanted != trained:
        raise dg.Failure(
            f"this run's settings give {cell.split}/{cell.name} the adapters "
            f"{sorted(s.name for seeds in wanted.values() for s in seeds)}, but the code "
            f"location's graph has {sorted(s.name for seeds in trained.values() for s in seeds)}"
            ": training.selection and training.replicates shape the graph; set them in the "
            "location's profile (SATURATED_DAG_PROFILE), not in run config overrides")


def _validation(folder: Path) -> tuple[float, int]:
    """A trained adapter's kept epoch and its validation pass@1 (fraction)."""
    record = folder / "result.json"
    if not record.is_file():
        raise dg.Failure(f"adapter {folder} has no result.json: materialise it first")
    result = json.loads(record.read_text())
    best = int(result["best_epoch"])
    values = [e.get("val_pass@1") for e in result["epochs"] if e["epoch"] == best]
    if not values or values[0] is None:
        raise dg.Failure(f"adapter {folder} recorded no validation pass@1 for its kept epoch "
                         f"{best}: selection needs one (App. B)")
    return float(values[0]), best


def selection_asset(task: str, cell: Experiment,
                    trained: dict[Experiment, list[Experiment]]) -> dg.AssetsDefinition:
    """``trained``: each configuration of the cell's grid (grid order) and its training-seed
    replicates (``experiments.configurations``, ``experiments.replicates``)."""

    @dg.asset(key=selection_key(task, cell), group_name=f"{task}_{cell.split}",
              io_manager_key="parquet_io", kinds={"selection", "polars", "parquet"},
              metadata=schema_metadata("selection"),
              deps=[dg.AssetKey([task, cell.split, "adapter", seeded.name])
                    for seeds in trained.values() for seeded in seeds],
              description=f"Selection grid of {cell.name} ({cell.split}): each configuration's "
              "validation pass@1 over its training seeds, the best one chosen (App. B).")
    def selection(context: dg.AssetExecutionContext,
                  experiment: ExperimentResource) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        same_adapters(profile, cell, trained)
        rows = []
        for config, seeds in trained.items():
            runs = [_validation(adapter_dir(experiment.output_dir, task, seeded))
                    for seeded in seeds]
            effective = config.training(profile.training)
            rows.append(Trained(config.name, {s: getattr(effective, s) for s in SETTINGS},
                                [v for v, _ in runs], [e for _, e in runs]))
        table = selection_table(rows)
        winner = chosen(table)
        context.log.info(f"{cell.split}/{cell.name}: chose {winner} of {table.height} "
                         "configurations by validation pass@1")
        return frame_output(table, {
            "chosen": winner,
            "configurations": table.height,
            "table": frame_table(table, max_rows=500),
        })

    return selection
