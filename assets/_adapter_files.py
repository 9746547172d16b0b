"""Where an adapter's files live and the hash of its weights.

Kept apart from ``assets/adapters.py`` so the eval reports and tables that only need these
paths do not import the trainer: their derived code versions (``assets/versioning.py``) then
change with the evaluation code, not with every edit to the training loop.
"""

from pathlib import Path

import dagster as dg

from saturated_dag.experiments import Experiment
from saturated_dag.shards import file_fingerprint
from saturated_dag.training.folders import ADAPTER_WEIGHTS, current_folder


def adapter_home(output_dir: str, task: str, exp: Experiment) -> Path:
    """``<output_dir>/adapters/<task>/<split>/<name>``: the whole name is the folder, dots and
    all, so ``lambda0.01`` and ``lambda0.5`` never share one. It holds one folder per cache
    key the adapter was trained under and ``current``, naming the one last materialised
    (``saturated_dag.training.folders``)."""
    return Path(output_dir) / "adapters" / task / exp.split / exp.name


def adapter_dir(output_dir: str, task: str, exp: Experiment) -> Path:
    """The adapter's current folder, ``<home>/<key>`` (what its asset last materialised); the
    home itself, which holds no adapter files, when it was never materialised, so a reader's
    ``(folder / "adapter_config.json").is_file()`` says it is missing."""
    home = adapter_home(output_dir, task, exp)
    try:
        folder = current_folder(home)
    except ValueError as err:
        raise dg.Failure(f"{err}: re-materialise adapter {exp.name} ({task}, "
                         f"{exp.split} split)") from err
    return home if folder is None else folder


def adapter_key(task: str, cell: Experiment) -> dg.AssetKey:
    """``<task>/<split>/adapter/<cell>``: the cell's adapters, one Dagster partition each."""
    return dg.AssetKey([task, cell.split, "adapter", cell.name])


def adapter_work_dir(output_dir: str, task: str, exp: Experiment) -> Path:
    """Scratch folder of a training run beside the adapter (kept only when training fails)."""
    return adapter_home(output_dir, task, exp).parent / f".{exp.name}-run"


def adapter_curves_png(output_dir: str, task: str, exp: Experiment) -> Path:
    """The adapter's training-curve figure, beside its folder."""
    return adapter_home(output_dir, task, exp).parent / f"{exp.name}_curves.png"




def adapter_weights_version(folder: Path) -> str:
    """The hash of an adapter's weights file: its data version, and what an eval report of it
    keys on (the record files beside it carry timings, which say nothing about the weights)."""
    weights = folder / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise dg.Failure(f"adapter {folder} has no {ADAPTER_WEIGHTS}: re-materialise it")
    return file_fingerprint(weights)
