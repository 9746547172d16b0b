"""``nightly_evaluation``: add one eval replicate to every materialised adapter's report.

The schedule looks up which adapters exist in the instance and requests their eval reports
(plus each task's base-model report, so deltas compare like with like), tagged
``saturated_dag/nightly``: each report then evaluates one replicate more than it holds, with a
fresh sampling seed (``assets/eval_reports.py``), and the automation sensor refreshes the
result tables, which aggregate every replicate so far. Nothing is requested when no adapter
exists.
"""

from collections.abc import Sequence

import dagster as dg

from jobs.executor import step_executor
from saturated_dag.config import Profile


def eval_key_of(adapter_key: dg.AssetKey) -> dg.AssetKey:
    """``<task>/<split>/adapter/<name>`` -> ``<task>/<split>/eval/<name>``."""
    task, split, _, name = adapter_key.path
    return dg.AssetKey([task, split, "eval", name])


def eval_keys(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetKey]:
    return [k for a in assets for k in a.keys if len(k.path) >= 2 and k.path[-2] == "eval"]


def nightly_evaluation_job(eval_report_keys: Sequence[dg.AssetKey], profile: Profile):
    return dg.define_asset_job(
        name="nightly_evaluation",
        selection=dg.AssetSelection.assets(*eval_report_keys),
        executor_def=step_executor(profile),
        description="Eval reports of the materialised adapters and the base model.",
    )


def requested_evals(instance: dg.DagsterInstance,
                    eval_report_keys: Sequence[dg.AssetKey]) -> list[dg.AssetKey]:
    """Eval reports of adapters materialised in ``instance``, with their tasks' base report."""
    known = set(eval_report_keys)
    wanted: list[dg.AssetKey] = []
    tasks: set[str] = set()
    for key in eval_report_keys:
        if key.path[1:3] == ["eval", "base"] or len(key.path) != 4:
            continue
        # a cell's adapter, or, for a cell with a selection grid, its selection
        upstream = [dg.AssetKey([key.path[0], key.path[1], kind, key.path[3]])
                    for kind in ("adapter", "selection")]
        if any(instance.get_latest_materialization_event(k) is not None for k in upstream):
            wanted.append(key)
            tasks.add(key.path[0])
    base = [dg.AssetKey([t, "eval", "base"]) for t in sorted(tasks)]
    return [k for k in base if k in known] + wanted


def nightly_evaluation_schedule(job, eval_report_keys: Sequence[dg.AssetKey],
                                cron: str = "0 2 * * *") -> dg.ScheduleDefinition:
    keys = list(eval_report_keys)

    @dg.schedule(name="nightly_evaluation", job=job, cron_schedule=cron,
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="Every night: one more eval replicate for every materialised "
                 "adapter and the base model.")
    def nightly(context: dg.ScheduleEvaluationContext):
        selection = requested_evals(context.instance, keys)
        if not selection:
            return dg.SkipReason("no adapter has been materialised yet")
        context.log.info(f"re-evaluating {len(selection)} eval reports")
        return dg.RunRequest(asset_selection=selection,
                             tags={"saturated_dag/nightly": "true"})

    return nightly
