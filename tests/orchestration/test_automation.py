"""What the two automation sensors start, tick by tick, on a small graph and on the real one.

The small graph is a diamond like pool -> partitions -> scores: ``upstream`` (with a blocking
check) feeds ``cpu_child`` and ``gpu_child`` (``pool="gpu"``), and ``cpu_child`` feeds
``gpu_child`` too. Each asset reports a data version the test chooses (``cpu_child``'s follows
``upstream``'s) and carries the condition ``with_automation`` gives the real assets. Each test
evaluates the conditions as the sensors do (``dg.evaluate_automation_conditions``, the cursor
carried from tick to tick).
"""

import dagster as dg
import pytest

from assets.automation import (
    COMPUTE_TAG,
    automation_sensors,
    cpu_condition,
    gpu_condition,
    with_automation,
)
from saturated_dag.config import AutomationSettings
from saturated_dag.profiles import available_profiles, load_profile

UP, CPU, GPU = dg.AssetKey("upstream"), dg.AssetKey("cpu_child"), dg.AssetKey("gpu_child")


def _graph(code: str = "1", gpu_on_code_change: bool = False) -> list:
    """The three assets at code version ``code``, their automation from ``with_automation``."""

    @dg.asset(key=UP, code_version=code, required_resource_keys={"data"},
              check_specs=[dg.AssetCheckSpec("valid", asset=UP, blocking=True)])
    def upstream(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        data = context.resources.data
        return dg.MaterializeResult(
            data_version=dg.DataVersion(data["version"]),
            check_results=[dg.AssetCheckResult(check_name="valid", passed=data["valid"])])

    @dg.asset(key=CPU, deps=[UP], code_version=code, required_resource_keys={"data"})
    def cpu_child(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(
            data_version=dg.DataVersion("cpu-" + context.resources.data["version"]))

    @dg.asset(key=GPU, deps=[UP, CPU], code_version=code, pool="gpu",
              required_resource_keys={"data"})
    def gpu_child(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        if context.resources.data["gpu_fails"]:
            raise RuntimeError("CUDA out of memory (simulated)")
        return dg.MaterializeResult(data_version=dg.DataVersion("gpu"))

    return with_automation([upstream, cpu_child, gpu_child],
                           AutomationSettings(gpu_on_code_change=gpu_on_code_change))


def _data(version: str = "a", valid: bool = True, gpu_fails: bool = False) -> dict:
    """What ``upstream`` reports (its data version, whether its blocking check passes) and
    whether ``gpu_child`` fails."""
    return {"data": dg.ResourceDefinition.hardcoded_resource(
        {"version": version, "valid": valid, "gpu_fails": gpu_fails})}


class Sensor:
    """Both sensors' conditions evaluated against one instance, the cursor kept between ticks
    (the real graph's test below evaluates the two sensors separately)."""

    def __init__(self) -> None:
        self.instance = dg.DagsterInstance.ephemeral()
        self.cursor = None

    def materialize(self, assets: list, keys: list[dg.AssetKey], version: str = "a",
                    valid: bool = True, gpu_fails: bool = False) -> None:
        # a run of the asset job over ``keys``, as the UI or a sensor launches it
        job = dg.Definitions(assets=assets, resources=_data(version, valid, gpu_fails)
                             ).resolve_implicit_global_asset_job_def()
        job.execute_in_process(instance=self.instance, asset_selection=keys,
                               raise_on_error=False)

    def tick(self, assets: list) -> set[dg.AssetKey]:
        result = dg.evaluate_automation_conditions(
            defs=dg.Definitions(assets=assets, resources=_data()), instance=self.instance,
            cursor=self.cursor)
        self.cursor = result.cursor
        return {k for k in (UP, CPU, GPU) if result.get_num_requested(k)}


def _settled(gpu_on_code_change: bool = False) -> tuple[Sensor, list]:
    """Everything materialised, upstream's check passed, and one quiet tick."""
    sensor, assets = Sensor(), _graph(gpu_on_code_change=gpu_on_code_change)
    sensor.materialize(assets, [UP, CPU, GPU])
    assert sensor.tick(assets) == set()
    return sensor, assets


@pytest.fixture
def settled() -> tuple[Sensor, list]:
    return _settled()


def test_missing_assets_are_requested_gpu_included_and_not_retried_every_tick() -> None:
    sensor, assets = Sensor(), _graph()
    assert sensor.tick(assets) == {UP, CPU, GPU}  # one run: upstream first, then the rest
    assert sensor.tick(assets) == set()  # that run failed: no retry loop on every tick
    sensor.materialize(assets, [UP])
    assert sensor.tick(assets) == {CPU}  # the GPU asset waits for its CPU input to catch up
    sensor.materialize(assets, [CPU])
    assert sensor.tick(assets) == {GPU}
    assert sensor.tick(assets) == set()


def test_assets_already_missing_at_the_first_tick_are_requested_once() -> None:
    sensor, assets = Sensor(), _graph()
    sensor.materialize(assets, [UP])  # before the sensor ever ran
    assert sensor.tick(assets) == {CPU, GPU}
    assert sensor.tick(assets) == set()


def test_code_change_requests_the_cpu_asset_but_not_the_gpu_one(settled) -> None:
    sensor, _ = settled
    changed = _graph(code="2")
    assert sensor.tick(changed) == {UP, CPU}
    sensor.materialize(changed, [UP, CPU])  # the same data again
    assert sensor.tick(changed) == set()


def test_with_the_opt_in_a_code_change_requests_the_gpu_asset_too() -> None:
    sensor, _ = _settled(gpu_on_code_change=True)
    assert sensor.tick(_graph(code="2", gpu_on_code_change=True)) == {UP, CPU, GPU}


def test_gpu_asset_follows_upstream_data_not_upstream_materialisations(settled) -> None:
    sensor, assets = settled
    sensor.materialize(assets, [UP], version="a")  # the same data again (a cache hit)
    assert sensor.tick(assets) == {CPU}
    sensor.materialize(assets, [CPU])
    assert sensor.tick(assets) == set()
    sensor.materialize(assets, [UP], version="b")  # new data
    assert sensor.tick(assets) == {CPU}  # first its CPU input is brought up to date,
    sensor.materialize(assets, [CPU], version="b")
    assert sensor.tick(assets) == {GPU}  # then the GPU asset runs, once
    sensor.materialize(assets, [GPU], version="b")
    assert sensor.tick(assets) == set()


def test_an_update_made_by_a_run_that_also_ran_the_gpu_asset_does_not_request_it(
        settled) -> None:
    sensor, assets = settled
    sensor.materialize(assets, [UP, CPU, GPU], version="b")
    assert sensor.tick(assets) == set()
    # the GPU step of such a run failed: the sensor does not retry someone else's failed run
    sensor.materialize(assets, [UP, CPU, GPU], version="c", gpu_fails=True)
    assert sensor.tick(assets) == set()


def test_a_run_of_the_gpu_asset_in_progress_blocks_it_until_it_ends(settled) -> None:
    sensor, assets = settled
    job = dg.Definitions(assets=assets, jobs=[dg.define_asset_job("gpu", selection=[GPU])],
                         resources=_data()).resolve_job_def("gpu")
    run = sensor.instance.create_run_for_job(job_def=job, asset_selection={GPU},
                                             status=dg.DagsterRunStatus.STARTED)
    sensor.materialize(assets, [UP, CPU], version="b")
    assert sensor.tick(assets) == set()
    sensor.instance.report_run_failed(run)  # the run ends without materialising it
    assert sensor.tick(assets) == {GPU}  # the change was remembered, not dropped


def test_a_failed_blocking_check_upstream_blocks_both_children(settled) -> None:
    sensor, assets = settled
    sensor.materialize(assets, [UP], version="b", valid=False)
    assert sensor.tick(assets) == set()
    sensor.materialize(assets, [UP], version="c", valid=True)
    assert sensor.tick(assets) == {CPU}
    sensor.materialize(assets, [CPU], version="c")
    assert sensor.tick(assets) == {GPU}


def test_sensors_split_the_assets_by_pool_and_only_the_cpu_one_runs_by_default() -> None:
    assets = _graph()
    cpu, gpu = automation_sensors(assets)
    assert (cpu.name, cpu.default_status) == ("automation_cpu", dg.DefaultSensorStatus.RUNNING)
    assert (gpu.name, gpu.default_status) == ("automation_gpu", dg.DefaultSensorStatus.STOPPED)
    graph = dg.Definitions(assets=assets, resources=_data()).resolve_asset_graph()
    assert cpu.asset_selection.resolve(graph) == {UP, CPU}
    assert gpu.asset_selection.resolve(graph) == {GPU}
    tags = {k: a.specs_by_key[k].tags[COMPUTE_TAG] for a in assets for k in a.keys}
    assert tags == {UP: "cpu", CPU: "cpu", GPU: "gpu"}


@pytest.mark.parametrize("profile", ["demo", "paper"])
def test_real_graph_every_gpu_pooled_asset_is_in_the_gpu_sensor_only(profile: str) -> None:
    from tests.pipeline import graph

    assets = [a for a in graph(profile)[0] if isinstance(a, dg.AssetsDefinition)]
    sensors = {s.name: s for s in automation_sensors(assets)}
    gpu_keys = {k for a in assets if a.is_materializable and a.op.pool == "gpu" for k in a.keys}
    cpu_keys = {k for a in assets if a.is_materializable and a.op.pool != "gpu" for k in a.keys}
    assert gpu_keys and cpu_keys
    assert sensors["automation_gpu"].asset_selection.resolve(assets) == gpu_keys
    assert sensors["automation_cpu"].asset_selection.resolve(assets) == cpu_keys
    assert sensors["automation_gpu"].default_status == dg.DefaultSensorStatus.STOPPED
    off = gpu_condition(on_code_change=False).get_label()
    for a in assets:
        for key in a.keys:
            condition = a.automation_conditions_by_key.get(key)
            if not a.is_materializable:
                assert condition is None, key  # base_model is observed, not automated
            else:
                wanted = off if key in gpu_keys else cpu_condition().get_label()
                assert condition is not None and condition.get_label() == wanted, key
    # the compute tag says what the asset needs: the demo's models run on the cores, the
    # paper's model steps on an accelerator (this machine has none: on_cpu reads the profile)
    tags = {k: a.specs_by_key[k].tags[COMPUTE_TAG] for a in assets if a.is_materializable
            for k in a.keys}
    assert {tags[k] for k in gpu_keys} == ({"cpu"} if profile == "demo" else {"gpu"})
    assert {tags[k] for k in cpu_keys} == {"cpu"}


@pytest.mark.parametrize("profile", available_profiles())
def test_no_shipped_profile_reruns_gpu_assets_on_a_code_change(profile: str) -> None:
    assert load_profile(profile).automation.gpu_on_code_change is False


# --- the real graph, on the embedded model -----------------------------------------------------

SMALL = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 4,
                  "strict_grid": None, "eval_questions_per_cell": 2},
    "sampling": {"n": 4},
    "training": {"splits": ["saturated"], "scorers": ["self_judge", "entropy"],
                 "methods": ["dpo"], "validation_questions_per_cell": 1,
                 "selection": {"learning_rates": None}},
    "judges": {"strong": {"kind": "rubric"}},
}


def _chain_sum(*path: str) -> dg.AssetKey:
    return dg.AssetKey(["chain_sum", *path])


POOL = _chain_sum("generation_pool")
GPU_SCORES = {_chain_sum(s) for s in ("entropy_scores", "self_judge_scores")}
"""The demo's scores that need the policy model (the gpu pool); its strong judge is the
chain-sum rubric, a CPU function that claims no slot of it."""
SLICE = {dg.AssetKey("base_model"), POOL, _chain_sum("difficulty_partitions"), *GPU_SCORES,
         _chain_sum("strong_judge_scores"),
         _chain_sum("random_scores"), _chain_sum("oracle_scores"),  # the demo lists the oracle
         _chain_sum("scorer_agreement"),
         _chain_sum("saturated", "dpo_pairs", "self_judge"),
         _chain_sum("saturated", "dpo_pairs", "entropy")}


def _slice_defs(assets: list, checks: list, resources: dict) -> dg.Definitions:
    """The slice of the profile's graph, its checks and the two sensors over it."""
    keep = [a for a in assets if isinstance(a, dg.AssetsDefinition) and a.key in SLICE]
    kept_checks = [c for c in checks if next(iter(c.check_keys)).asset_key in SLICE]
    return dg.Definitions(assets=keep, asset_checks=kept_checks, resources=resources,
                          sensors=automation_sensors(keep))


class TwoSensors:
    """``automation_cpu`` and ``automation_gpu`` evaluated separately, each with its own
    cursor, as the daemon does; ``settle_cpu`` runs what the CPU sensor asks for until quiet."""

    def __init__(self, defs: dg.Definitions) -> None:
        self.defs, self.instance = defs, dg.DagsterInstance.ephemeral()
        self.cursors: dict[str, object] = {}

    def tick(self, name: str) -> set[dg.AssetKey]:
        sensor = next(s for s in self.defs.sensors if s.name == name)
        result = dg.evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.cursors.get(name),
            asset_selection=sensor.asset_selection)
        self.cursors[name] = result.cursor
        return {k for k in SLICE if result.get_num_requested(k)}

    def run(self, keys: set[dg.AssetKey], resources: dict | None = None) -> None:
        defs = self.defs if resources is None else dg.Definitions(
            assets=self.defs.assets, asset_checks=self.defs.asset_checks, resources=resources)
        job = defs.resolve_implicit_global_asset_job_def()
        assert job.execute_in_process(instance=self.instance, asset_selection=list(keys),
                                      raise_on_error=False).success

    def settle_cpu(self) -> set[dg.AssetKey]:
        ran: set[dg.AssetKey] = set()
        for _ in range(6):
            keys = self.tick("automation_cpu")
            if not keys:
                return ran
            ran |= keys
            self.run(keys)
        raise AssertionError("the CPU sensor kept requesting after six ticks")


def _edited(edit: str):
    def read(path):
        data = path.read_bytes()
        return data + b"\n# edited\n" if path.as_posix().endswith("/" + edit) else data
    return read


def test_real_graph_gpu_assets_follow_new_pool_data_not_a_cache_hit_nor_a_code_edit(
        tmp_path) -> None:
    from assets.automation import with_lineage
    from assets.versioning import SourceTree
    from tests.pipeline import graph, resources

    assets, checks = graph("demo", SMALL)
    res = resources(tmp_path / "out", "demo", SMALL)
    sensors = TwoSensors(_slice_defs(assets, checks, res))
    sensors.run(SLICE)
    assert sensors.tick("automation_gpu") == set() and sensors.settle_cpu() == set()

    # the pool again, unchanged (a stage-cache hit): the CPU assets below it rerun (cheap), and
    # since their data is unchanged too, no GPU asset is requested
    sensors.run({POOL})
    assert _chain_sum("difficulty_partitions") in sensors.settle_cpu()
    assert sensors.tick("automation_gpu") == set()

    # an edit to the entropy scorer: the CPU assets whose imports reach it rerun, the GPU ones
    # whose version it changed (the scores) do not
    profile = load_profile("demo", SMALL)
    relined = with_lineage(assets, profile, SourceTree(read=_edited(
        "saturated_dag/scorers/entropy_scores.py")))
    before = {k: v for a in assets if isinstance(a, dg.AssetsDefinition)
              for k, v in a.code_versions_by_key.items()}
    after = {k: v for a in relined for k, v in a.code_versions_by_key.items()}
    changed = {k for k in SLICE if before[k] != after[k]}
    assert GPU_SCORES & changed and _chain_sum("scorer_agreement") in changed
    sensors.defs = _slice_defs(relined, checks, res)
    assert sensors.tick("automation_gpu") == set()
    assert changed - GPU_SCORES <= sensors.settle_cpu()
    assert sensors.tick("automation_gpu") == set()

    # new pool data (another sampling seed): the pool's CPU children catch up first, then the
    # GPU scores are requested, once
    reseeded = {**SMALL, "sampling": {"n": 4, "seed": 1}}
    sensors.run({POOL}, resources(tmp_path / "out", "demo", reseeded))
    assert sensors.tick("automation_gpu") == set()  # partitions are not re-split yet
    assert _chain_sum("difficulty_partitions") in sensors.settle_cpu()
    assert sensors.tick("automation_gpu") == GPU_SCORES
