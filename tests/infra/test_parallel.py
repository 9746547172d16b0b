"""Model steps and their threads (``saturated_dag/infra/parallel.py``, ``jobs/executor.py``): one at
a time on every core by default, or one per core with one thread each, never more threads than
cores, and a ``gpu`` pool with a slot per model step the layout runs at once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.infra.parallel import cpu_cores, on_cpu, step_layout
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT

PROBE_DIR = "SATURATED_DAG_TEST_PROBE_DIR"
PER_CORE = {"execution": {"model_steps": "one_per_core"}}


def _probe(name: str) -> None:
    """What a step's process sees: its pid, torch's threads, the OpenMP setting, its span."""
    import torch

    begin = time.time()
    time.sleep(1.5)  # long enough that two steps run side by side when they can
    record = {"pid": os.getpid(), "threads": torch.get_num_threads(),
              "omp": os.environ.get("OMP_NUM_THREADS"), "begin": begin, "end": time.time()}
    (Path(os.environ[PROBE_DIR]) / f"{name}.json").write_text(json.dumps(record))


def _probe_job(overrides: dict) -> dg.JobDefinition:
    """Two independent model steps (pool ``gpu``) with the project's resources and the
    executor of the demo profile with ``overrides``."""
    from jobs.executor import step_executor
    from resources import make_resources

    @dg.asset(pool="gpu", required_resource_keys={"experiment"})
    def first() -> None:
        _probe("first")

    @dg.asset(pool="gpu", required_resource_keys={"experiment"})
    def second() -> None:
        _probe("second")

    defs = dg.Definitions(
        assets=[first, second],
        resources=make_resources("demo", str(Path(os.environ[PROBE_DIR]) / "outputs"),
                                 overrides),
        jobs=[dg.define_asset_job("probe", executor_def=step_executor(
            load_profile("demo", overrides)))])
    return defs.resolve_job_def("probe")


def default_probe_job() -> dg.JobDefinition:
    """The probe on the demo's own layout (a module-level function: Dagster rebuilds a
    reconstructable job by name, and caches it by name)."""
    return _probe_job({})


def per_core_probe_job() -> dg.JobDefinition:
    """The probe with ``PER_CORE``, rebuilt by each step process."""
    return _probe_job(PER_CORE)


def _run_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job, slots: int
               ) -> list[dict]:
    monkeypatch.setenv(PROBE_DIR, str(tmp_path))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.event_log_storage.set_concurrency_slots("gpu", slots)
        assert dg.execute_job(dg.reconstructable(job), instance=instance).success
    return [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("first", "second")]


def test_the_default_runs_one_model_step_at_a_time_on_every_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = load_profile("demo")
    assert on_cpu(profile)
    layout = step_layout(profile)
    assert (layout.steps, layout.threads, layout.processes) == (1, cpu_cores(), "run")
    records = _run_probe(tmp_path, monkeypatch, default_probe_job, layout.steps)
    for record in records:
        assert record["threads"] == cpu_cores() and record["omp"] == str(cpu_cores())
        assert record["pid"] == os.getpid()  # the run's own process (in-process executor)
    a, b = records
    assert a["end"] <= b["begin"] or b["end"] <= a["begin"]  # one at a time


def test_one_per_core_runs_a_thread_per_step_and_a_step_per_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = step_layout(load_profile("demo", PER_CORE))
    assert (layout.steps, layout.threads, layout.processes) == (cpu_cores(), 1, "per_step")
    records = _run_probe(tmp_path, monkeypatch, per_core_probe_job, layout.steps)
    for record in records:
        assert record["threads"] == 1, record  # no step oversubscribes the cores
        assert record["omp"] == "1"
        assert record["pid"] != os.getpid()  # a step process, not the orchestrating one
    if cpu_cores() >= 2:  # two model steps at once on two cores
        a, b = records
        assert a["pid"] != b["pid"]
        assert a["begin"] < b["end"] and b["begin"] < a["end"], records


@pytest.mark.parametrize(("overrides", "per_core"), [({}, False), (PER_CORE, True)])
def test_the_gpu_pool_has_a_slot_per_model_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                overrides: dict, per_core: bool) -> None:
    """``scripts/init_instance.py`` sizes the pool every model step claims by the layout."""
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location(
        "init_instance", REPO_ROOT / "scripts" / "init_instance.py")
    assert spec is not None and spec.loader is not None
    init = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(init)
    profile_file = tmp_path / "profile.yaml"
    demo = REPO_ROOT / "saturated_dag" / "profiles" / "demo.yaml"
    settings = yaml.safe_load(demo.read_text())
    settings.update(overrides)
    profile_file.write_text(yaml.safe_dump(settings))
    monkeypatch.setenv("SATURATED_DAG_PROFILE", str(profile_file))
    home = tmp_path / "home"
    # set before init_instance (which sets it too), so the test's end restores the value the
    # process had, not this test's folder, which is gone by then
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    init.init_instance(home)
    with dg.DagsterInstance.get() as instance:
        slots = instance.event_log_storage.get_concurrency_info("gpu").slot_count
    assert slots == (cpu_cores() if per_core else 1)


def test_an_accelerator_profile_keeps_one_process_per_run() -> None:
    """vLLM (the paper's profiles) runs in the run's own process: the engine loads once."""
    from jobs.executor import step_executor

    paper = load_profile("paper")
    assert not on_cpu(paper) and step_layout(paper).processes == "run"
    assert step_executor(paper) is dg.in_process_executor
    assert step_executor(load_profile("demo")) is dg.in_process_executor
    assert step_executor(load_profile("demo", PER_CORE)).name == "multiprocess_executor"


def test_the_cpu_build_of_torch_counts_no_device_without_importing_torch() -> None:
    """Loading the definitions asks for the CUDA devices; torch's CPU build answers 0 from its
    version (``+cpu``) alone, and with a CUDA build torch itself is asked."""
    import importlib.metadata
    import subprocess
    import sys

    probe = ("import sys; from saturated_dag.infra.parallel import cuda_devices; "
             "print(cuda_devices(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    cpu_build = importlib.metadata.version("torch").endswith("+cpu")
    assert out == (["0", "False"] if cpu_build else [out[0], "True"])
