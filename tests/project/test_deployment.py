"""The Kubernetes deployment's configuration (deploy/k8s, docs/deployment.md), checked offline.

No cluster is needed: the executor config is validated against dagster-k8s's own
``k8s_job_executor`` schema, the GPU settings parse as a ``dagster-k8s/config`` value and land on
exactly the GPU work, and the Helm values agree with the instance configuration in this
repository (pool limit, volumes, the code location they serve). Skipped where dagster-k8s is not
installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

K8S = REPO_ROOT / "deploy" / "k8s"


@pytest.fixture(scope="module")
def k8s_module() -> ModuleType:
    """deploy/k8s/k8s_definitions.py, loaded as the user-code deployment loads it."""
    pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed "
                        "(pip install -e '.[deploy]')")
    spec = importlib.util.spec_from_file_location("saturated_dag_k8s_definitions",
                                                  K8S / "k8s_definitions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load((K8S / "values.yaml").read_text())


def _gpu_limit(config: Any) -> str | None:
    return config.container_config.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")


def test_gpu_config_is_a_valid_k8s_config_tag(k8s_module: ModuleType) -> None:
    from dagster_k8s.job import UserDefinedDagsterK8sConfig, get_user_defined_k8s_config

    config = UserDefinedDagsterK8sConfig.from_dict(k8s_module.GPU_K8S_CONFIG)
    assert _gpu_limit(config) == "1"
    tags = {"dagster-k8s/config": json.dumps(k8s_module.GPU_K8S_CONFIG)}
    assert _gpu_limit(get_user_defined_k8s_config(tags)) == "1"


def test_executor_config_validates_and_targets_gpu_steps(k8s_module: ModuleType) -> None:
    """executor.yaml plus the per-step GPU settings pass k8s_job_executor's schema; exactly the
    ops of pool="gpu" assets get a GPU, among them the generation pool's."""
    import dagster as dg
    from dagster_k8s import k8s_job_executor

    import definitions
    from jobs.location import gpu_ops

    repository = definitions.defs
    config = k8s_module.executor_config(gpu_ops(list(repository.assets or [])))
    probe = dg.Definitions(
        assets=repository.assets, resources=repository.resources,
        jobs=[dg.define_asset_job("k8s_probe", selection=["base_model"],
                                  executor_def=k8s_job_executor)])
    dg.validate_run_config(probe.resolve_job_def("k8s_probe"), {"execution": {"config": config}})

    per_step = config["per_step_k8s_config"]
    assert "chain_sum__generation_pool" in per_step
    in_pool = {assets.node_def.name for assets in repository.assets
               if isinstance(assets, dg.AssetsDefinition) and assets.node_def.pool == "gpu"}
    assert set(per_step) == in_pool
    assert "chain_sum__difficulty_partitions" not in per_step
    assert "gpu" not in json.dumps(config["step_k8s_config"]).lower()  # CPU pods by default


def test_kubernetes_definitions(k8s_module: ModuleType) -> None:
    """The k8s code location: the k8s executor by default, GPU run tags on in-process jobs."""
    from dagster_k8s.job import get_user_defined_k8s_config

    from jobs.staged import WHOLE_JOB_TAG

    defs = k8s_module.defs
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "k8s_gpu_aware"
    demo = next(job.name for job in defs.jobs if job.name.startswith("demo_part_1"))
    for name in (demo, "chain_sum_generation"):
        job = defs.resolve_job_def(name)
        assert job.executor_def.name == "in_process"  # the model still loads once per run
        assert _gpu_limit(get_user_defined_k8s_config(job.run_tags)) == "1"
    # given where the job is defined (jobs.staged.asset_job), beside the job's own run tags
    assert defs.resolve_job_def(demo).run_tags[WHOLE_JOB_TAG] == "demo"
    import definitions

    local = definitions.defs  # the same builder: the same jobs, the local executor
    assert {job.name for job in local.jobs} == {job.name for job in defs.jobs}
    assert local.resolve_job_def(demo).run_tags.get("dagster-k8s/config") is None


def test_helm_values_match_the_instance_config(values: dict[str, Any]) -> None:
    """Pool limit as in dagster.yaml; the code location, output volume and Postgres wired."""
    instance = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    postgres = yaml.safe_load((REPO_ROOT / "deploy" / "postgres" / "dagster.yaml").read_text())
    limit = instance["concurrency"]["pools"]["default_limit"]
    assert postgres["concurrency"]["pools"]["default_limit"] == limit
    assert values["concurrency"]["enabled"] is True
    assert values["concurrency"]["pools"]["defaultLimit"] == limit

    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    args = deployment["dagsterApiGrpcArgs"]
    assert (REPO_ROOT / args[args.index("-f") + 1]).is_file()

    env = {e["name"]: e["value"] for e in deployment["env"]}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert dict(v.split("=", 1) for v in launcher["envVars"]) == env
    mounts = {m["mountPath"] for m in deployment["volumeMounts"]}
    assert env["SATURATED_DAG_OUTPUT_DIR"] in mounts
    assert launcher["volumeMounts"] == deployment["volumeMounts"]
    assert launcher["volumes"] == deployment["volumes"]

    pg = values["postgresql"]
    assert pg["postgresqlHost"] and pg["postgresqlUsername"] and pg["postgresqlDatabase"]


def test_helm_run_pod_config_is_valid(values: dict[str, Any]) -> None:
    pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed")
    from dagster_k8s.job import UserDefinedDagsterK8sConfig

    run_k8s = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    config = UserDefinedDagsterK8sConfig.from_dict(
        {"container_config": run_k8s.get("containerConfig", {}),
         "pod_spec_config": run_k8s.get("podSpecConfig", {})})
    assert _gpu_limit(config) is None  # run pods of k8s-executor runs only orchestrate


def test_kubernetes_code_location_validates() -> None:
    """Loaded the way the user-code deployment loads it (a file, the repository as working dir)."""
    pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed")
    dagster = str(Path(sys.executable).parent / "dagster")
    out = subprocess.run([dagster, "definitions", "validate", "-f",
                          "deploy/k8s/k8s_definitions.py", "-d", "."], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "All code locations passed validation" in out.stdout + out.stderr


def test_every_instance_config_monitors_and_retries_runs(values: dict[str, Any]) -> None:
    """Local, PostgreSQL and Helm: a dead run is marked failed, its slots freed, and it is
    retried once from failure (issue 14.4)."""
    local = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    postgres = yaml.safe_load((REPO_ROOT / "deploy" / "postgres" / "dagster.yaml").read_text())
    for config in (local, postgres):
        assert config["run_monitoring"]["enabled"] is True
        assert config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0
        assert config["run_retries"] == local["run_retries"]
    assert postgres["run_monitoring"] == local["run_monitoring"]
    daemon = values["dagsterDaemon"]
    assert daemon["runMonitoring"]["enabled"] is True
    assert daemon["runRetries"] == {"enabled": True,
                                    "maxRetries": local["run_retries"]["max_retries"]}
