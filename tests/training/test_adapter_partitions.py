"""A cell's configurations x seeds as Dagster partitions: one adapter asset per cell, one
partition per adapter; a whole-task job as one run per partition set; a cell's adapters trained
in one step with one load of the base model."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets import profile_assets
from jobs.location import build_defs
from jobs.staged import RANGE_END, RANGE_START, part_names, stages
from saturated_dag.config import SamplingSettings, TrainingSettings
from saturated_dag.experiments import adapter_partition_key, experiment_plan
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from saturated_dag.tasks.base import Question
from saturated_dag.training import train as train_module
from saturated_dag.training.request import TrainingRequest
from saturated_dag.training.runner import InThisProcess, SideBySide, run_trainings

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first

PROFILES = ("demo", "study", "ci", "paper", "rehearsal")


@pytest.mark.parametrize("name", PROFILES)
def test_every_adapter_is_one_partition_of_its_cells_asset(name: str) -> None:
    """Each cell's partition keys name its adapters one to one, in configuration and seed order; the
    adapters of all cells are the plan's (none lost, a shared one under each of its cells)."""
    profile = load_profile(name)
    for task, plan in experiment_plan(profile).items():
        seen = set()
        for cell in plan.cells:
            keyed = plan.partitions[cell]
            adapters = [a for seeds in plan.trained[cell].values() for a in seeds]
            assert list(keyed.values()) == adapters
            assert list(keyed) == [
                adapter_partition_key(profile.training, cell, a, profile.data_seeds)
                for a in adapters]
            assert all("seed" in key and "..." not in key for key in keyed)
            seen |= set(adapters)
        assert seen == set(plan.adapters)
        # cells of one partition set run in one run, in parallel steps: none may train another's
        # adapter (two cells share one only across partition sets, so the later part reuses it)
        for partition_set, cells in plan.cells_by_partitions.items():
            assert all(tuple(plan.partitions[c]) == partition_set for c in cells)
            shared = [a for c in cells for a in plan.partitions[c].values()]
            assert len(shared) == len(set(shared)), (name, task, partition_set)


def test_the_demo_partition_keys_say_what_varies() -> None:
    """Keys name the settings the cell's selection varies, always written out, then the seed."""
    profile = load_profile("demo")
    plan = experiment_plan(profile)["chain_sum"]
    keys = {f"{c.split}/{c.name}": list(plan.partitions[c]) for c in plan.cells}
    assert keys["saturated/sft"] == ["lr0.0003_seed0", "lr0.001_seed0"]
    assert keys["hard/dpo_correctness_random"][:2] == ["beta0.1_lr0.0003_seed0",
                                                       "beta2_lr0.0003_seed0"]
    assert len(plan.cells_by_partitions) == 4  # four partition sets: four runs for the demo
    assert sum(map(len, plan.cells_by_partitions.values())) == len(plan.cells)


def test_a_whole_task_job_is_one_part_per_partition_set_and_covers_the_graph_once() -> None:
    """``demo``'s parts: each part's adapter assets share one partitions definition; together
    the parts select every asset of the graph exactly once, the upstream assets in the first
    and the downstream ones in the last; each part carries its partition set's whole range."""
    profile = load_profile("demo")
    defs = build_defs("demo", "outputs")
    graph = defs.resolve_asset_graph()
    names = part_names("demo", profile, profile.tasks)
    assert names == [f"demo_part_{i}_of_4" for i in range(1, 5)]
    selected: list[dg.AssetKey] = []
    for index, name in enumerate(names):
        job = defs.resolve_job_def(name)
        keys = set(job.asset_layer.executable_asset_keys)
        selected += keys
        partitioned = {graph.get(k).partitions_def for k in keys
                       if graph.get(k).partitions_def is not None}
        assert len(partitioned) == 1, name
        (definition,) = partitioned
        assert (job.tags[RANGE_START], job.tags[RANGE_END]) == (
            definition.get_partition_keys()[0], definition.get_partition_keys()[-1])
        if index == 0:
            assert dg.AssetKey(["chain_sum", "generation_pool"]) in keys
        if index == len(names) - 1:
            assert dg.AssetKey(["chain_sum", "results_table"]) in keys
    executable = {k for k in graph.get_all_asset_keys() if graph.get(k).is_executable}
    assert sorted(selected) == sorted(executable)  # each once
    # the tests' rule for a slice of the graph is the jobs' rule
    assets, _ = profile_assets(profile)
    runs = stages(assets, sorted(executable))
    jobs = [set(defs.resolve_job_def(n).asset_layer.executable_asset_keys) for n in names]
    assert [(set(keys) - j, j - set(keys)) for (keys, _), j in zip(runs, jobs, strict=True)
            ] == [(set(), set())] * len(names)


def test_the_paper_location_holds_one_adapter_asset_per_cell() -> None:
    """The paper's 3,060 adapters are 53 assets (a cell each), so its graph stays small."""
    profile = load_profile("paper")
    assets, _ = profile_assets(profile)
    adapters = [a for a in assets if isinstance(a, dg.AssetsDefinition)
                and "adapter" in a.key.path]
    plans = experiment_plan(profile)
    assert len(adapters) == sum(len(p.cells) for p in plans.values()) == 53
    assert sum(len(a.partitions_def.get_partition_keys()) for a in adapters) == sum(
        len(p.partitions[c]) for p in plans.values() for c in p.cells)
    assert all(a.backfill_policy == dg.BackfillPolicy.single_run() for a in adapters)


def _sft_requests(tmp_path: Path, model: Path) -> list[TrainingRequest]:
    """Two SFT requests of plain settings, built as a training child receives them: no profile
    anywhere, the validation question written out."""
    training = TrainingSettings(epochs=1, batch_size=2, per_device_batch_size=2, max_length=96,
                                lora_r=4, lora_alpha=8)
    prompt_text = "Compute the following step by step:\n1 + 2 ="
    prompt = f"<|user|>{prompt_text}<|end|><|assistant|>"
    validation = [Question(question_id="v0", task="chain_sum", pool="validation", cell="2x1",
                           problem="1 + 2", prompt_text=prompt_text, gold="3")]
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data.parquet"
    atomic_write_parquet(pl.DataFrame({"prompt": [prompt] * 4,
                                       "completion": [" 1 + 2 = 3. Answer: 3"] * 4}), data)
    return [TrainingRequest(task="chain_sum", method="sft",
                            training=training.model_copy(update={"learning_rate": rate,
                                                                 "seed": seed}),
                            sampling=SamplingSettings(n=2, max_new_tokens=4),
                            answer_check="last_boxed", validation=validation,
                            workers=2,  # a CPU's: one torch thread per training
                            base_model=str(model), batch_size=8, data=str(data),
                            out_dir=str(tmp_path / name), record={"cache_key": name})
            for name, rate, seed in (("a", 1e-2, 0), ("b", 1e-3, 1))]


def test_a_cells_adapters_train_with_one_base_model_load_and_the_same_weights(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two adapters in one process load the base model once; each gets a copy, so the
    second adapter's weights are those it gets trained alone from a fresh load."""
    loads = []
    real = train_module.load_model
    monkeypatch.setattr(train_module, "load_model",
                        lambda *a, **k: loads.append(a) or real(*a, **k))
    together = _sft_requests(tmp_path / "together", tiny_model_dir)
    run_trainings(together, InThisProcess())
    assert len(loads) == 1
    alone = _sft_requests(tmp_path / "alone", tiny_model_dir)[1]
    run_trainings([alone], InThisProcess())
    assert len(loads) == 2
    weights = "adapter_model.safetensors"
    assert (Path(together[1].out_dir) / weights).read_bytes() == (
        Path(alone.out_dir) / weights).read_bytes()
    assert (Path(together[0].out_dir) / weights).read_bytes() != (
        Path(alone.out_dir) / weights).read_bytes()
    for request in together:  # each published whole, with the record a cache hit checks
        record = pl.read_json(Path(request.out_dir) / "result.json")
        assert record["cache_key"][0] == request.record["cache_key"]
        assert record["weights_version"][0]


def test_the_parts_cli_prints_the_parts_in_order_and_refuses_what_the_profile_lacks() -> None:
    """``python -m jobs.parts``, which the run scripts loop over: the demo's parts, one per
    line, without runpy's "found in sys.modules" warning; a task the profile does not run, or
    no job, exits 2 naming why."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    def parts(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "jobs.parts", *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "SATURATED_DAG_PROFILE": "demo"})

    listed = parts("demo")
    assert listed.returncode == 0, listed.stderr[-2000:]
    profile = load_profile("demo")
    assert listed.stdout.split() == part_names("demo", profile, profile.tasks)
    assert "RuntimeWarning" not in listed.stderr
    refused = parts("paper_gsm8k")
    assert refused.returncode == 2 and "does not run ['gsm8k']" in refused.stderr
    assert parts().returncode == 2


@dg.op
def _toy_step(context: dg.OpExecutionContext) -> None:
    if context.job_name == "fails":
        raise RuntimeError("planted failure")


def toy_part(name: str) -> dg.JobDefinition:
    """A one-op job named ``name`` that fails when the name is ``fails`` (for ``run_parts``)."""
    return dg.JobDefinition(graph_def=dg.GraphDefinition(name=name, node_defs=[_toy_step]),
                            executor_def=dg.in_process_executor)


def test_run_parts_runs_each_part_in_order_and_stops_at_the_first_failure(capsys) -> None:
    """``python -m run_parts``, which the run scripts call: one Dagster run per part, in
    order, on the instance; a failed part stops the sequence with exit 1, naming its run,
    and the finished parts keep their runs."""
    from run_parts import run_parts

    toy = (__name__, "toy_part")
    with dg.instance_for_test() as instance:
        assert run_parts(["first", "second"], instance, toy) == 0
        assert [r.job_name for r in reversed(instance.get_runs())] == ["first", "second"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in instance.get_runs())
    with dg.instance_for_test() as instance:
        assert run_parts(["first", "fails", "never"], instance, toy) == 1
        runs = {r.job_name: r for r in instance.get_runs()}
        assert sorted(runs) == ["fails", "first"]
        assert runs["first"].status == dg.DagsterRunStatus.SUCCESS
        assert runs["fails"].status == dg.DagsterRunStatus.FAILURE
    assert f"run {runs['fails'].run_id} of fails failed" in capsys.readouterr().err


def test_run_parts_builds_each_run_from_the_code_location() -> None:
    """The runs' job comes from ``definitions.py`` by name, so a part run this way is the
    same job ``dagster job execute -f definitions.py -j <part>`` runs."""
    import definitions
    from run_parts import RECONSTRUCTOR, part_job

    assert RECONSTRUCTOR == ("run_parts", "part_job")
    name = part_names("demo", load_profile("demo"), ["chain_sum"])[0]
    assert part_job(name) is definitions.defs.resolve_job_def(name)


def _keyed(requests: list[TrainingRequest]) -> list[TrainingRequest]:
    """``requests`` with the adapter folders' layout: ``<adapter name>/<key folder>``."""
    return [request.model_copy(update={"out_dir": str(Path(request.out_dir) / "key")})
            for request in requests]


def dies_on_b(request: TrainingRequest, tag: str) -> dict:
    """A side-by-side worker's training that kills its process on adapter ``b`` (the OOM
    killer), and waits on the others so the kill lands mid-step."""
    import os
    import time

    from saturated_dag.training.runner import train_in_worker

    if Path(request.out_dir).parent.name == "b":
        os._exit(9)
    time.sleep(2)
    return train_in_worker(request, tag)


def raises_on_b(request: TrainingRequest, tag: str) -> dict:
    """A side-by-side worker's training that raises on adapter ``b`` at once."""
    from saturated_dag.training.runner import train_in_worker

    if Path(request.out_dir).parent.name == "b":
        raise ValueError("planted training error")
    return train_in_worker(request, tag)


def test_a_training_that_raises_lets_the_step_finish_then_fails_with_its_own_error(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """A side-by-side training that raises: the others of the step still publish their
    adapters, then the step fails with that training's own error, naming its adapter."""
    requests = _keyed(_sft_requests(tmp_path / "step", tiny_model_dir))
    with pytest.raises(ValueError, match="planted training error") as raised:
        run_trainings(requests, SideBySide(2, train=raises_on_b))
    assert any(requests[1].out_dir in note for note in raised.value.__notes__)
    assert (Path(requests[0].out_dir) / "adapter_model.safetensors").is_file()
    assert not Path(requests[1].out_dir).exists()


def test_a_cells_adapters_train_side_by_side_one_thread_per_process_with_the_weights_of_one_alone(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Item 1 of the throughput issue on CPU: a cell's adapters train at the same time in one
    process per core, each with one torch thread, and each adapter's weights are those it
    gets trained alone in a one-thread process."""
    import os

    import torch

    from saturated_dag.infra.parallel import cpu_cores, training_workers

    # the defaults: the demo's profile trains side by side on every core of a CPU
    assert training_workers(load_profile("demo")) == cpu_cores()
    lines: list[str] = []
    requests = _keyed(_sft_requests(tmp_path / "together", tiny_model_dir))
    records = run_trainings(requests, SideBySide(2), log=lines.append)
    assert [r["cache_key"] for r in records] == ["a", "b"]
    workers = [r["worker"] for r in records]
    assert {w["torch_threads"] for w in workers} == {1}
    assert len({w["pid"] for w in workers}) == 2 and os.getpid() not in {
        w["pid"] for w in workers}
    first, second = sorted(workers, key=lambda w: w["start"])
    assert second["start"] < first["end"]  # at the same time
    assert any(line.startswith("a: training sft") for line in lines)  # progress, named
    assert any(line.startswith("b: training sft") for line in lines)
    threads = torch.get_num_threads()
    [alone] = run_trainings([_sft_requests(tmp_path / "alone", tiny_model_dir)[1]], InThisProcess())
    assert torch.get_num_threads() == threads  # one thread for the training, then as before
    weights = "adapter_model.safetensors"
    assert (Path(records[1]["adapter_dir"]) / weights).read_bytes() == (
        Path(alone["adapter_dir"]) / weights).read_bytes()


def test_a_training_process_that_dies_fails_the_step_naming_what_is_not_trained(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """A side-by-side worker killed mid-step fails the step with the adapters that were not
    trained, instead of hanging or passing."""
    requests = _keyed(_sft_requests(tmp_path / "step", tiny_model_dir))
    with pytest.raises(RuntimeError, match="a training process died") as raised:
        run_trainings(requests, SideBySide(2, train=dies_on_b))
    assert requests[1].out_dir in str(raised.value)


def test_the_steps_summary_names_ties_and_says_whose_entries_the_overview_shows() -> None:
    """A step of several partitions: the highest validation pass@1 names every tied partition
    (not one of them as if chosen), and the summary says the entries below the table are the
    last partition's, with the selection's choice on its own page."""
    from assets.adapters import partitions_summary
    from saturated_dag.experiments import main_matrix

    cell = next(c for c in main_matrix(load_profile("demo").training) if c.method == "dpo")
    done = [(p, {"best validation pass@1 (%)": v, "cache": "miss"}, "w")
            for p, v in (("beta0.1_lr0.0003_seed0", 90.0), ("beta2_lr0.0003_seed0", 90.0),
                         ("beta2_lr0.001_seed0", 80.0))]
    text = partitions_summary(cell, done, selected=True)
    assert "Highest validation pass@1 90.00% (beta0.1_lr0.0003_seed0, beta2_lr0.0003_seed0)" in text
    assert "partition beta2_lr0.001_seed0's, the last this step materialised" in text
    assert f"`{cell.split}/selection/{cell.name}`" in text
    alone = partitions_summary(cell, done[:1], selected=False)
    assert "the last this step" not in alone and "(beta0.1_lr0.0003_seed0)." in alone
