"""Where an adapter's files live, the hash of its weights, and the check every reader makes.

Every reader of an adapter (eval reports, selection, the runs table, the sweep tables, the
model cards the eval reports fill, the adapters' own load check) finds its folder through
``adapter_dir``, which checks it against the adapter's record before returning it
(``training.folders.check_adapter``): a key folder copied from another adapter, or weights
changed in place, fails the reading step naming the file, what was expected and found, and
the fix, instead of being read as this adapter.

Kept apart from ``assets/adapters.py`` so the eval reports and tables that only need these
paths do not import the trainer: their derived code versions (``assets/versioning.py``) then
change with the evaluation code, not with every edit to the training loop.
"""

from pathlib import Path

import dagster as dg

from saturated_dag.experiments import Adapter, Cell
from saturated_dag.infra.shards import file_fingerprint
from saturated_dag.training.folders import (
    ADAPTER_WEIGHTS,
    AdapterIdentity,
    AdapterMismatch,
    check_adapter,
    current_folder,
)


def adapter_home(output_dir: str, task: str, exp: Adapter) -> Path:
    """``<output_dir>/adapters/<task>/<split>/<name>``: the whole name is the folder, dots and
    all, so ``lambda0.01`` and ``lambda0.5`` never share one. It holds one folder per cache
    key the adapter was trained under and ``current``, naming the one last materialised
    (``saturated_dag.training.folders``)."""
    return Path(output_dir) / "adapters" / task / exp.split / exp.name


def adapter_identity(task: str, exp: Adapter) -> AdapterIdentity:
    """What adapter ``exp`` of ``task`` is, as its folder's record must say."""
    return AdapterIdentity(task=task, split=exp.split, adapter=exp.name, method=exp.method)


def adapter_dir(output_dir: str, task: str, exp: Adapter) -> Path:
    """The adapter's current folder, ``<home>/<key>`` (what its asset last materialised),
    checked to be this adapter with the weights its training recorded; the home itself,
    which holds no adapter files, when it was never materialised (or ``current`` names a
    folder that is gone), so a reader's ``(folder / "adapter_config.json").is_file()`` says
    it is missing. A folder that is not this adapter fails the step: re-materialise it."""
    home = adapter_home(output_dir, task, exp)
    try:
        folder = current_folder(home)
        if folder is None or not folder.is_dir():
            return home
        check_adapter(folder, adapter_identity(task, exp))
    except (AdapterMismatch, ValueError) as err:
        raise dg.Failure(f"{err}: re-materialise adapter {exp.name} ({task}, {exp.split} "
                         f"split: the partition of its configuration and seed in its cell's "
                         f"asset {task}/{exp.split}/adapter/...)") from None
    return folder


def adapter_key(task: str, cell: Cell) -> dg.AssetKey:
    """``<task>/<split>/adapter/<cell>``: the cell's adapters, one Dagster partition each."""
    return dg.AssetKey([task, cell.split, "adapter", cell.name])


def adapter_work_dir(output_dir: str, task: str, exp: Adapter) -> Path:
    """Scratch folder of a training run beside the adapter (kept only when training fails)."""
    return adapter_home(output_dir, task, exp).parent / f".{exp.name}-run"


def adapter_curves_png(output_dir: str, task: str, exp: Adapter) -> Path:
    """The adapter's training-curve figure, beside its folder."""
    return adapter_home(output_dir, task, exp).parent / f"{exp.name}_curves.png"




def adapter_weights_version(folder: Path) -> str:
    """The hash of an adapter's weights file: its data version, and what an eval report of it
    keys on (the record files beside it carry timings, which say nothing about the weights)."""
    weights = folder / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise dg.Failure(f"adapter {folder} has no {ADAPTER_WEIGHTS}: re-materialise it")
    return file_fingerprint(weights)
