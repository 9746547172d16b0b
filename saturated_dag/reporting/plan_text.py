"""What a profile will train, row by row, before anyone pays for it.

For each table row (main matrix, then each sweep) of each task: the cell it reports, how many
configurations it selects among and over how many training seeds, the settings it holds fixed and
the settings its selection varies, with their values. Read off the same plan the Dagster layer
builds its graph from (``saturated_dag.experiments.experiment_plan``), so a defect in the
configurations (a sweep row that selects over the value it exists to fix) shows here as it would in
a run. ``scripts/experiment_plan.py`` prints it; ``docs/paper-run.md`` holds its output for
``paper`` and ``paper_instruct``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from saturated_dag.config import Profile
from saturated_dag.experiments import ORDER, SWEEP_TITLES, experiment_plan, number_text
from saturated_dag.methods import label as method_label
from saturated_dag.methods import methods_reading
from saturated_dag.reporting.labels import sweep_row_label

METHODS_OF = {key: methods_reading(key) for key in ORDER}
"""Settings that only some methods read (the others read the rest)."""


@dataclass(frozen=True)
class PlanRow:
    """One table row: the cell it reports and what its selection trains."""

    task: str
    table: str
    label: str
    cell: str  # split/name, the asset key of its selection and eval report
    configurations: int
    seeds: int
    adapters: int
    fixed: dict[str, Any]  # every setting the method reads that one value holds for all
    varied: dict[str, list[Any]]  # the settings its selection varies, with their values


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return number_text(value) if isinstance(value, float) else str(value)


def task_plan(profile: Profile, task: str) -> list[PlanRow]:
    """Every row of ``task``'s tables, main matrix first, in the order the tables print."""
    training = profile.training
    plan = experiment_plan(profile)[task]
    out = []
    for sweep, row, cell in plan.rows:
        if row is None or sweep is None:
            table = "results"
            label = method_label(cell.method) + (
                f" · {cell.scorer}" if cell.scorer else "")
        else:
            table, label = SWEEP_TITLES[sweep], sweep_row_label(sweep, row)
        trained = plan.trained[cell]
        effective = [config.training(training).model_dump() for config in trained]
        values = {key: sorted({e[key] for e in effective}) for key in ORDER
                  if key != "seed" and cell.method in METHODS_OF.get(key, {cell.method})}
        out.append(PlanRow(task, table, label, f"{cell.split}/{cell.name}", len(trained),
                           len(next(iter(trained.values()))),
                           sum(len(seeds) for seeds in trained.values()),
                           {k: v[0] for k, v in values.items() if len(v) == 1},
                           {k: v for k, v in values.items() if len(v) > 1}))
    return out


def markdown(profile: Profile) -> str:
    """The plan of every task as Markdown tables, with each task's distinct adapter count."""
    parts = []
    for task in profile.tasks:
        rows = task_plan(profile, task)
        adapters = len(experiment_plan(profile)[task].adapters)
        parts += [f"**{task}**: {len(rows)} rows, {adapters:,} distinct adapters (a row "
                  "whose configuration another row also trains shares its adapters)", "",
                  "| table | row | cell | configurations x seeds | every configuration holds | "
                  "selects among |",
                  "|---|---|---|---:|---|---|"]
        for r in rows:
            fixed = ", ".join(f"{k}={_value(v)}" for k, v in r.fixed.items()) or "—"
            varied = "; ".join(f"{k} ∈ {{{', '.join(_value(v) for v in values)}}}"
                               for k, values in r.varied.items()) or "— (one configuration)"
            parts.append(f"| {r.table} | {r.label} | `{r.cell}` | {r.configurations} x "
                         f"{r.seeds} = {r.adapters} | {fixed} | {varied} |")
        parts.append("")
    return "\n".join(parts)

