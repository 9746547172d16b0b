"""Which assets and result tables each shipped profile defines (Tables 1-3, 7-9, Figure 6),
and what building them reads."""

import sys
from collections.abc import Callable
from types import FrameType

import dagster as dg
import pytest

from assets import profile_assets, task_assets
from jobs import generation_jobs, paper_jobs
from jobs.staged import part_names
from saturated_dag.experiments import experiment_plan
from saturated_dag.profiles import load_profile


def _keys(profile: str) -> set[dg.AssetKey]:
    assets, _ = profile_assets(load_profile(profile))
    return {k for a in assets for k in a.keys}


def _tables(profile: str) -> set[str]:
    return {"/".join(k.path) for k in _keys(profile)
            if k.path[-1] in ("results_table", "rank_weight_ablation", "rrhf_variants",
                              "dpo_beta_sweep")}


def test_paper_profile_has_every_chain_sum_table_and_gsm8k_without_strict_split() -> None:
    tables = _tables("paper")
    assert {"chain_sum/results_table", "chain_sum/rank_weight_ablation",
            "chain_sum/rrhf_variants", "chain_sum/dpo_beta_sweep",
            "gsm8k/results_table"} <= tables
    keys = _keys("paper")
    assert dg.AssetKey(["chain_sum", "hard", "adapter", "dpo_correctness_self_judge"]) in keys
    # GSM8K trains on Q_easy only (Sec. 4.3, Table 2): no hard rows, no ablations, no D'
    assert {k.path[1] for k in keys if k.path[0] == "gsm8k" and "adapter" in k.path} == {
        "saturated"}
    assert not [k for k in keys if k.path[:2] == ["gsm8k", "strict_saturated"]]
    assert not {"gsm8k/rank_weight_ablation", "gsm8k/rrhf_variants"} & tables


@pytest.mark.parametrize("profile", ["paper_instruct"])
def test_instruct_profile_is_table_3(profile: str) -> None:
    loaded = load_profile(profile)
    assert loaded.policy.model == "Qwen/Qwen3-1.7B" and loaded.tasks == ["gsm8k"]
    keys = {"/".join(k.path) for k in _keys(profile)
            if k.path[0] == "gsm8k" and "eval" in k.path}
    assert keys == {f"gsm8k/saturated/eval/dpo_{s}"
                    for s in ("self_judge", "strong_judge", "entropy", "random")} | {
        "gsm8k/hard/eval/dpo_correctness_random",
        "gsm8k/hard/eval/dpo_correctness_self_judge", "gsm8k/eval/base"}
    # each of Table 3's six cells selects among Table 5's configurations, as in `paper` (App. B)
    partition_sets = [a.partitions_def.get_partition_keys() for a in profile_assets(loaded)[0]
                      if isinstance(a, dg.AssetsDefinition) and a.key.path[0] == "gsm8k"
                      and "adapter" in a.key.path]
    assert len(partition_sets) == 6 and {len(g) for g in partition_sets} == {3 * 3 * 4 * 5}
    assert not [k for k in _keys(profile) if k.path[0] == "chain_sum"]


@pytest.mark.parametrize("profile", ["demo", "ci", "paper", "paper_instruct"])
def test_the_graph_holds_only_the_profiles_tasks(profile: str) -> None:
    """A task the profile does not run has no asset, no check and no job (the demo's graph
    held about 60 GSM8K assets that could never materialise)."""
    loaded = load_profile(profile)
    assets, checks = profile_assets(loaded)
    tasks = {k.path[0] for a in assets for k in a.keys if k.path != ["base_model"]}
    assert tasks == set(loaded.tasks)
    assert {next(iter(c.check_keys)).asset_key.path[0] for c in checks} == set(loaded.tasks)
    jobs = [*generation_jobs(loaded), *paper_jobs(loaded)]
    assert {j.name for j in jobs} == {f"{t}_generation" for t in loaded.tasks} | {
        n for t in loaded.tasks for n in part_names(f"paper_{t}", loaded, [t])}


def test_advisory_checks_warn_and_blocking_checks_error(tmp_path) -> None:
    """The eval-coverage check is advisory (non-blocking): its failure is a WARN. Every other
    check gates what runs downstream (blocking) and fails as an ERROR."""

    from assets.eval_reports import base_eval_asset, coverage_check
    from resources import ExperimentLocation, ExperimentResource
    from tests.scoring_data import eval_report

    _, checks = profile_assets(load_profile("ci"))
    specs = [spec for c in checks for spec in c.check_specs]
    advisory = {s.name for s in specs if not s.blocking}
    assert advisory == {"eval_report_covers_every_question"}
    check = coverage_check("chain_sum", base_eval_asset("chain_sum"))
    verdict = check(experiment=ExperimentResource(location=ExperimentLocation(
                        profile="ci", output_dir=str(tmp_path))),
                    report=eval_report({"not-an-eval-question": (1, 1)}))
    assert not verdict.passed and verdict.severity == dg.AssetCheckSeverity.WARN


def _core_modules_called(build: Callable[[], object]) -> set[str]:
    """The core modules (``saturated_dag.*``) whose functions code of the Dagster layer's
    ``assets`` package calls while ``build`` runs, seen by a profile hook (``sys.setprofile``)
    on every Python call."""
    called: set[str] = set()

    def watch(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_back is not None:
            callee = frame.f_globals.get("__name__", "")
            caller = frame.f_back.f_globals.get("__name__", "")
            if callee.startswith("saturated_dag.") and caller.split(".")[0] == "assets":
                called.add(callee)

    previous = sys.getprofile()  # a profiler already running (a coverage tool) gets it back
    sys.setprofile(watch)
    try:
        build()
    finally:
        sys.setprofile(previous)
    return called


# What the asset factories may read of the core while they build a task's assets: the plan's
# resolved specs (``experiments``), the scorer specs its scorer names resolve to (``scorers``;
# resolved by ``task_assets``, so the plan's code does not import the scorers) and the asset
# frames' declared schemas (``schemas``).
PLAN_SPECS = {"saturated_dag.experiments", "saturated_dag.scorers.builtin",
              "saturated_dag.scorers.registry", "saturated_dag.schemas"}


@pytest.mark.parametrize("profile", ["demo", "study", "testbed", "dpo_search", "paper"])
def test_building_a_tasks_assets_reads_only_the_plans_specs(profile: str) -> None:
    """The graph's construction resolves the profile once, in the plan: the asset factories
    (``assets.task_assets(plan)``) call no core function outside the plan's specs, so none of
    them re-derives questions, settings or paths from the profile (``data.questions``,
    ``config``, ``training`` ... are never entered). The demo is the default profile; the
    others add the study's draws, both testbed analyses and the paper's two tasks."""
    for plan in experiment_plan(load_profile(profile)).values():
        called = _core_modules_called(lambda plan=plan: task_assets(plan))
        assert "saturated_dag.experiments" in called  # the hook saw the factories read the plan
        assert called <= PLAN_SPECS, f"{plan.task}: {sorted(called - PLAN_SPECS)}"
