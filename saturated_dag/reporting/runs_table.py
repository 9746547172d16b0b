"""One row per trained adapter of a task: the runs table (``<task>/runs_table``).

The result tables report a cell's chosen configuration; this table keeps every adapter the
selections and the sweeps trained (each configuration x training seed), so a reader
sees what was tried, what won and by how much: the adapter's settings as its
``training_config.json`` records them, its kept epoch and validation pass@1 (what selection
read, App. B), whether its cell chose it, and, for a chosen configuration, its eval pass@1 /
pass@k and Δ to the base model with paired 95% intervals.

Why per adapter, not per configuration: a cell's eval report holds each training seed as
``training_replicate`` r (seed ``training.seed + r``), so a row reads its own seed's share of
the report; the intervals then rest on the eval questions (and eval replicates) alone,
comparable across rows of one eval set. An adapter that several cells train (a sweep row
equal to a main cell's configuration) is one row; ``cells`` names them all.

Pure core: the Dagster layer (``assets/runs_table.py``) reads the files and frames and calls
``runs_table``; ``saturated_dag.reporting.tracking`` logs its rows to MLflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from saturated_dag.config import Profile
from saturated_dag.experiments import SWITCHES, Adapter, Cell, Configuration, TaskPlan
from saturated_dag.reporting.labels import scientific
from saturated_dag.reporting.result_tables import results_table
from saturated_dag.schemas import schema
from saturated_dag.training.config import settings_record

TRAINER_COLUMNS = {
    "learning_rate": "learning_rate", "epochs": "epochs", "batch_size": "batch_size",
    "per_device_batch_size": "per_device_batch_size", "warmup_ratio": "warmup_ratio",
    "weight_decay": "weight_decay", "max_length": "max_length", "beta": "dpo_beta",
    "loss_type": "dpo_loss", "rank_weight": "rrhf_rank_weight", "use_sft": "rrhf_use_sft",
    "hinge": "rrhf_hinge", "logistic_weight": "rrhf_logistic_weight",
    "sft_token_mean": "rrhf_sft_token_mean", "seed": "seed"}
"""Trainer config field (``training.config``'s dataclasses) -> runs-table column: the names
the profile's ``training`` section uses, so a column reads like the setting that set it."""
LORA_COLUMNS = {"r": "lora_r", "alpha": "lora_alpha", "dropout": "lora_dropout"}
HYPERPARAMETERS = (*TRAINER_COLUMNS.values(), *LORA_COLUMNS.values(), "precision")
"""The columns that say how an adapter was trained (MLflow params, ``tracking``)."""


def cell_key(cell: Cell) -> str:
    """``<split>/<name>``: a cell's name is unique within its split only."""
    return f"{cell.split}/{cell.name}"


@dataclass(frozen=True)
class TrainedAdapter:
    """One adapter of a task and where it sits: its configuration (its seed 0),
    its training replicate r (the eval report's ``training_replicate``) and every cell whose
    configurations include it."""

    adapter: Adapter
    configuration: Configuration
    replicate: int
    cells: tuple[Cell, ...]


def task_adapters(plan: TaskPlan) -> list[TrainedAdapter]:
    """Every adapter ``plan``'s task trains, each once, in the graph's order (cells,
    configurations, seeds)."""
    found: dict[Adapter, TrainedAdapter] = {}
    for cell, trained in plan.trained.items():
        for config, seeds in trained.items():
            for replicate, seeded in enumerate(seeds):
                known = found.get(seeded)
                cells = (cell,) if known is None else (*known.cells, cell)
                found[seeded] = TrainedAdapter(seeded, config, replicate, cells)
    return list(found.values())


@dataclass(frozen=True)
class AdapterRecord:
    """What an adapter's ``training_config.json`` says: its kept epoch, that epoch's validation
    pass@1 (a fraction), the trainer settings and the precision it trained in."""

    best_epoch: int | None
    validation: float | None
    settings: Mapping[str, Any]
    precision: str | None


def read_record(folder: Path) -> AdapterRecord | None:
    """The adapter's record, or None when it has none yet (not trained)."""
    path = Path(folder) / "training_config.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    best = record.get("best_epoch")
    values = [e.get("val_pass@1") for e in record.get("epochs", []) if e.get("epoch") == best]
    return AdapterRecord(None if best is None else int(best),
                         None if not values or values[0] is None else float(values[0]),
                         record.get("settings", {}), record.get("precision"))


def _hyperparameters(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The trainer settings as runs-table columns (a key the method lacks stays null)."""
    out = {column: settings[key] for key, column in TRAINER_COLUMNS.items() if key in settings}
    lora = settings.get("lora") or {}
    out.update({column: lora[key] for key, column in LORA_COLUMNS.items() if key in lora})
    return out


def chosen_configurations(plan: TaskPlan, adapters: Sequence[TrainedAdapter],
                          selections: Mapping[str, str]) -> dict[str, str]:
    """Each cell's chosen configuration (``cell_key`` -> adapter name): its selection's
    choice (``selections``), or its one configuration when it has only one.

    A cell with several configurations and no selection is an error naming it: which of its
    adapters the eval report evaluated would otherwise be a guess."""
    out: dict[str, str] = {}
    cells = {cell_key(c): c for a in adapters for c in a.cells}
    for key, cell in cells.items():
        configs = list(plan.trained[cell])
        if len(configs) == 1:
            out[key] = configs[0].name
        elif key in selections:
            out[key] = selections[key]
        else:
            raise ValueError(f"cell {key} selects among {len(configs)} configurations but no "
                             "selection was given for it: materialise its selection first")
    return out


def _eval_rows(adapters: Sequence[TrainedAdapter], chosen: Mapping[str, str],
               reports: Mapping[str, pl.DataFrame], base: pl.DataFrame | None, k: int,
               eval_set: str | None) -> dict[Adapter, dict[str, Any]]:
    """Each evaluated adapter's eval numbers: its own training seed's share of the report of
    a cell that chose its configuration, against the base model's report."""
    picked: dict[Adapter, tuple[str, pl.DataFrame]] = {}
    for a in adapters:
        for cell in a.cells:
            key = cell_key(cell)
            if chosen.get(key) != a.configuration.name or key not in reports:
                continue
            report = reports[key]
            if "training_replicate" in report.columns:
                report = report.filter(pl.col("training_replicate") == a.replicate)
            elif a.replicate:
                continue  # a one-seed report holds no replicate r > 0
            if not report.is_empty():
                picked[a.adapter] = (key, report)
                break
    if base is None or not picked:
        return {}
    runs = {(a.split, a.name, None): report for a, (_, report) in picked.items()}
    table = results_table(base, runs, k=k, eval_set=eval_set)
    rows = list(table.iter_rows(named=True))[1:]  # row 0 is the base model's
    return {adapter: {"eval report": key, **row}
            for (adapter, (key, _)), row in zip(picked.items(), rows, strict=True)}


def runs_table(profile: Profile, task: str, adapters: Sequence[TrainedAdapter],
               records: Mapping[Adapter, AdapterRecord | None],
               paths: Mapping[Adapter, str],
               chosen: Mapping[str, str], reports: Mapping[str, pl.DataFrame],
               base: pl.DataFrame | None, eval_set: str | None = None) -> pl.DataFrame:
    """The runs table of ``task``: one row per adapter, in ``adapters``' order.

    ``records``: each adapter's ``read_record`` (None: not trained yet; its settings are then
    the planned ones and its kept epoch and validation are null). ``paths``: each adapter's
    folder. Both by the adapter itself, not its name: splits train adapters of the same name
    (``dpo_self_judge`` on saturated and on strict_saturated). ``chosen``:
    ``chosen_configurations``. ``reports`` and ``base``: per-question eval results
    (``evaluation.per_question_results``) by ``cell_key`` and of the base model; an adapter
    no report evaluates has null eval columns. Percentages, as in the other tables.
    """
    k = profile.sampling.n
    declared = schema("runs_table", k=k)
    evaluated = _eval_rows(adapters, chosen, reports, base, k, eval_set)
    rows = []
    for a in adapters:
        exp = a.adapter
        record = records.get(exp)
        planned = settings_record(exp.method, exp.training(profile.training))
        settings = record.settings if record is not None and record.settings else planned
        validation = None if record is None or record.validation is None else (
            100 * record.validation)
        row: dict[str, Any] = {
            "task": task, "adapter": exp.name, "configuration": a.configuration.name,
            "cells": ", ".join(c.name for c in a.cells), "split": exp.split,
            "method": exp.method, "scorer": exp.scorer, **_hyperparameters(settings),
            "precision": None if record is None else record.precision,
            "epoch kept": None if record is None else record.best_epoch,
            "validation pass@1": validation,
            "chosen": any(chosen.get(cell_key(c)) == a.configuration.name for c in a.cells),
            "adapter_path": paths.get(exp)}
        # the results table's own split/method/scorer name its rows, not this adapter
        row.update({c: v for c, v in evaluated.get(exp, {}).items()
                    if c not in ("split", "method", "scorer")})
        rows.append({c: row.get(c) for c in declared})
    return pl.DataFrame(rows, schema=declared, orient="row") if rows else pl.DataFrame(
        schema=declared)


INLINE_ROWS = 20
"""At most this many rows of a split inline: a longer table pushes the page's other entries
off the first screens; the summary says how many rows each split leaves out, and every row is
in ``runs_table.csv`` and the Parquet file."""

NO_BREAK = "\u2011"
"""A hyphen the UI does not break a line at (U+2011): ``3e‑4`` stays on one line."""


def _interval(value: float | None, low: float | None, high: float | None) -> str | None:
    """``+1.04 [−0.65, +2.86]``: a Δ and its paired 95% interval, one cell to read."""
    if value is None:
        return None
    if low is None or high is None:
        return f"{value:+.2f}"
    return f"{value:+.2f} [{low:+.2f}, {high:+.2f}]"


def _number(value: float | None) -> str | None:
    """A β or λ as the profile writes it (``0.1``, ``2``): short and exact."""
    return None if value is None else f"{value:g}"


def variant(configuration: str) -> str | None:
    """The σ-RRHF switches a configuration's name turns on or off (``no_hinge``), which no
    column of the inline table shows; None when it has none."""
    tokens = [f"{state}_{name}" for state in ("no", "with") for name in SWITCHES.values()
              if f"_{state}_{name}" in f"_{configuration}"]
    return " ".join(tokens) or None


COMPACT = ("split", "method", "scorer", "β", "λ", "η", "val. pass@1", "Δ pass@1")
"""The inline table's columns: what a reader compares (the settings that vary between configurations
as columns, not inside an adapter's name, and Δ with its 95% interval in one cell, ``+3.12 [+0.00,
+6.25]``; ``val. pass@1``, the kept epoch's validation pass@1, which the selection chose by, its
header short because the UI does not break "validation"), few and short enough for the UI's metadata
panel. The UI breaks a cell only at a space, so a page is as wide as the longest words of its
columns added up, and it shows one table per split (``by_split``) without a split column as wide as
``strict_saturated``. A split column, or a seed column, makes the table wider than the panel
(``runs: strict_saturated`` and ``no_logistic`` are words the UI cannot break), so a training seed
is named in the method's cell (``rrhf seed 2``), and only where the configuration was trained with
more than one. Δ is there for the adapters with an eval report, which are the chosen ones; every
column (the adapter's name, its seed, the kept epoch, whether it was chosen, intervals of pass@1 and
pass@k, LoRA settings) is in the Parquet file and ``runs_table.csv``."""


def seeds_per_configuration(frame: pl.DataFrame) -> pl.DataFrame:
    """``split, configuration, seed``: how many training seeds each configuration was trained
    with (a configuration is a split and a name: names repeat across splits)."""
    return frame.group_by("split", "configuration").agg(pl.col("seed").n_unique())


def compact(frame: pl.DataFrame, max_rows: int | None = INLINE_ROWS) -> pl.DataFrame:
    """The runs table as the UI shows it inline: the evaluated adapters first, by Δ pass@1
    from the highest, then the rest by validation pass@1; at most ``max_rows`` rows (None:
    all). A σ-RRHF switch that the configuration changes follows its method
    (``rrhf no_hinge``), and so does the training seed of a configuration trained with
    several (``rrhf seed 2``); learning rates in scientific notation (``3e-4``), β and λ as the
    profile writes them, an empty cell where the method has no such setting."""
    seeded = set(seeds_per_configuration(frame).filter(pl.col("seed") > 1)
                 .select("split", "configuration").iter_rows())
    ordered = frame.with_row_index("_order").sort(
        [pl.col("Δ pass@1").is_null(), "Δ pass@1", "validation pass@1", "_order"],
        descending=[False, True, True, False], nulls_last=True, maintain_order=True)
    if max_rows is not None:
        ordered = ordered.head(max_rows)
    rows = []
    for row in ordered.iter_rows(named=True):
        method = " ".join(filter(None, (
            row["method"], variant(row["configuration"]),
            f"seed {row['seed']}" if (row["split"], row["configuration"]) in seeded else None)))
        rows.append({
            "split": row["split"], "method": method,
            "scorer": row["scorer"] or "—",
            "β": _number(row["dpo_beta"]), "λ": _number(row["rrhf_rank_weight"]),
            "η": _unbroken(scientific(row["learning_rate"])),
            "val. pass@1": None if row["validation pass@1"] is None
            else f"{row['validation pass@1']:.2f}",
            "Δ pass@1": _interval(row["Δ pass@1"], row["Δ pass@1 low"], row["Δ pass@1 high"])})
    return pl.DataFrame(rows, schema=dict.fromkeys(COMPACT, pl.String), orient="row")


def _unbroken(text: str | None) -> str | None:
    return None if text is None else text.replace("-", NO_BREAK)


def by_split(view: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """``compact``'s rows as one table per split, in the order their first row comes (so the
    split with the best Δ first), each without the split column."""
    order = list(dict.fromkeys(view["split"].to_list()))
    return {split: view.filter(pl.col("split") == split).drop("split") for split in order}


def inline_tables(frame: pl.DataFrame, max_rows: int = INLINE_ROWS
                  ) -> dict[str, tuple[pl.DataFrame, int]]:
    """The inline view, one table per split (``by_split``): each split's first ``max_rows``
    rows in ``compact``'s order, with how many rows the split has (every split's rows are
    ordered on their own, so no split loses its rows to another's)."""
    return {split: (rows.head(max_rows), rows.height)
            for split, rows in by_split(compact(frame, max_rows=None)).items()}

def configurations(frame: pl.DataFrame) -> tuple[int, dict[int, int]]:
    """How many configurations the table holds, and how many of them were trained with each
    number of training seeds (``{1: 72, 3: 2}``).

    A configuration is a split and a configuration name together: names repeat across splits
    (``dpo_self_judge`` on saturated and on strict_saturated), so counting names alone
    undercounts."""
    if frame.is_empty():
        return 0, {}
    seeds = seeds_per_configuration(frame)
    counts = seeds["seed"].value_counts().sort("seed")
    return seeds.height, dict(zip(counts["seed"].to_list(), counts["count"].to_list(),
                                  strict=True))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary(frame: pl.DataFrame, task: str, tracking: str | None = None,
            inline: dict[str, tuple[int, int]] | None = None) -> str:
    """A few lines of Markdown: how many adapters, configurations and seeds, how many chosen
    and evaluated, the best eval pass@1 with its Δ, how many rows each split's inline table
    shows of its own (``inline``: split -> shown, total; None: not said), and where the rows
    were tracked (``tracking``, None: off)."""
    chosen = int(frame["chosen"].sum()) if frame.height else 0
    evaluated = frame.filter(pl.col("pass@1").is_not_null())
    total, by_seeds = configurations(frame)
    seeds = ", ".join(f"{count} with {_plural(n, 'training seed')}"
                      for n, count in by_seeds.items())
    lines = [f"**{_plural(frame.height, 'adapter')}** of {task}: "
             f"{_plural(total, 'configuration')} (split x settings; {seeds}); {chosen} "
             f"chosen by their cells' selection, {evaluated.height} with an eval report."]
    if evaluated.height:
        best = evaluated.sort("pass@1", descending=True, maintain_order=True).row(0, named=True)
        lines.append(f"Best eval pass@1: **{best['adapter']}** ({best['split']}) "
                     f"{best['pass@1']:.2f}%, Δ {best['Δ pass@1']:+.2f} "
                     f"[{best['Δ pass@1 low']:+.2f}, {best['Δ pass@1 high']:+.2f}] points "
                     "against the base model (paired 95% interval).")
    if inline is not None:
        cut = [f"`runs: {split}` {shown} of its {total}" for split, (shown, total)
               in inline.items() if shown < total]
        shown = ("every row, one table per split" if not cut else
                 "one table per split, the evaluated rows first, by Δ pass@1: "
                 + ", ".join(cut) + " rows; the others every row")
        lines.append(f"Below: {shown}; every row and column in `runs_table.csv`.")
    lines.append(f"MLflow: {'off (tracking.mlflow)' if tracking is None else f'`{tracking}`'}.")
    return "\n\n".join(lines)
