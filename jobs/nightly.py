"""``nightly_evaluation``: add one eval replicate to every materialised adapter's report.

The schedule reads the profile's plan (``eval_targets``), looks up which adapters exist in the
instance and requests their eval reports
(plus each task's base-model report, so deltas compare like with like), tagged
``saturated_dag/nightly``: each report then evaluates one replicate more than it holds, with a
fresh sampling seed (``assets/eval_reports.py``), and the automation sensor refreshes the
result tables, which aggregate every replicate so far. Nothing is requested when no adapter
exists.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from assets._adapter_files import adapter_key
from assets._keys import located
from jobs.executor import step_executor
from jobs.staged import RunTagsFor, asset_job, no_run_tags
from saturated_dag.config import Profile
from saturated_dag.experiments import experiment_plan


@dataclass(frozen=True)
class EvalTarget:
    """An eval report of the plan, its task, and what must be materialised before it is
    worth re-evaluating (empty for a task's base report, requested beside its cells')."""

    task: str
    key: dg.AssetKey
    upstream: tuple[dg.AssetKey, ...] = ()


def eval_targets(profile: Profile) -> list[EvalTarget]:
    """Every eval report of the profile's plan: each task's base report, then each cell's,
    waiting on the cell's selection (of several configurations) or its adapters."""
    targets = []
    for task, plan in experiment_plan(profile).items():
        targets.append(EvalTarget(task, located(profile, [task, "eval", "base"])))
        selected = set(plan.selections)
        for cell in plan.cells:
            upstream = (located(profile, [task, cell.split, "selection", cell.name])
                        if cell in selected else located(profile, adapter_key(task, cell)))
            targets.append(EvalTarget(task, located(profile, [task, cell.split, "eval",
                                                              cell.name]), (upstream,)))
    return targets


def nightly_evaluation_job(eval_report_keys: Sequence[dg.AssetKey], profile: Profile,
                           run_tags_for: RunTagsFor = no_run_tags):
    return asset_job(
        "nightly_evaluation",
        dg.AssetSelection.assets(*eval_report_keys),
        run_tags_for=run_tags_for,
        executor_def=step_executor(profile),
        description="Eval reports of the materialised adapters and the base model.",
    )


def requested_evals(instance: dg.DagsterInstance,
                    targets: Sequence[EvalTarget]) -> list[dg.AssetKey]:
    """Eval reports whose adapters (or selection) are materialised in ``instance``, with
    their tasks' base reports first."""
    wanted = [t for t in targets if t.upstream and any(
        instance.get_latest_materialization_event(k) is not None for k in t.upstream)]
    tasks = {t.task for t in wanted}
    return [t.key for t in targets if not t.upstream and t.task in tasks] + [
        t.key for t in wanted]


def nightly_evaluation_schedule(job, targets: Sequence[EvalTarget], cron: str = "0 2 * * *",
                                status: dg.DefaultScheduleStatus =
                                dg.DefaultScheduleStatus.RUNNING) -> dg.ScheduleDefinition:
    """``targets``: ``eval_targets(profile)``; ``status``: the schedule's status when its
    location first loads."""
    keys = list(targets)

    @dg.schedule(name="nightly_evaluation", job=job, cron_schedule=cron,
                 default_status=status,
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
