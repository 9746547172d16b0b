"""Issue 14 item 5: one inference resource, per-run overrides, in-process runs.

* the ``experiment`` overrides are the profile's own nested shape, validated by its model when
  a run starts (issue 49: no generated config classes), carry launch-time config to both
  resources, and clear nullable settings with a null;
* ``InferenceResource`` loads each engine once per run, keeps at most one exclusive (CUDA or
  vLLM) engine, releases everything for training and at teardown (fake backends stand in
  for CUDA engines; a tiny real model checks the transformers path);
* every job of the code location, the implicit one behind UI materialisations and sensor
  runs included, uses the in-process executor.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pydantic import BaseModel

import resources.inference as inference_module
from resources import (
    ExperimentLocation,
    ExperimentResource,
    InferenceResource,
    make_resources,
)
from resources.experiment import layered_profile
from saturated_dag.config import Profile, ProfileError
from saturated_dag.profiles import load_profile

LAUNCH = "this run's launch overrides"


def _leaves(model: type[BaseModel], path: str = "") -> list[str]:
    """Every field path of the profile's model, nested models walked."""
    found = []
    for name, info in model.model_fields.items():
        nested = [a for a in (info.annotation, *getattr(info.annotation, "__args__", ()))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        found += _leaves(nested[0], f"{path}{name}.") if nested else [f"{path}{name}"]
    return found


def test_any_profile_field_is_a_launch_override_in_the_profiles_own_shape() -> None:
    """No second description of the profile: a launch override of a nested field (deep in the vLLM,
    judge, question-grid and sweep settings) reaches the settings as the model reads it."""
    paths = _leaves(Profile)
    assert {"policy.vllm.max_lora_rank", "judges.strong.kind", "chain_sum.grid.terms",
            "stages.shard_questions"} <= set(paths)
    launch = {"policy": {"vllm": {"max_lora_rank": 16}}, "judges": {"strong": {"kind": "llm"}},
              "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}},
              "stages": {"shard_questions": 7}}
    got = layered_profile("paper", [(LAUNCH, launch)])
    assert (got.policy.vllm.max_lora_rank, got.judges.strong.kind, got.chain_sum.grid.terms,
            got.stages.shard_questions) == (16, "llm", (2, 2), 7)


@pytest.mark.parametrize(("profile", "launch"), [("demo", "study"), ("testbed", "study")])
def test_the_key_prefix_is_not_a_launch_override(tmp_path: Path, profile: str,
                                                  launch: str) -> None:
    """The key prefix names the location's asset keys, fixed when it loads: a launch override
    that changes it is refused (eval reports would link and observe keys of no asset); one
    that repeats it, or none, is fine (the shipped profiles: demo without, testbed with)."""
    location = ExperimentLocation(profile=profile, output_dir=str(tmp_path))
    with pytest.raises(ProfileError, match="key_prefix"):
        _ = ExperimentResource(location=location, overrides={"key_prefix": launch}).settings
    same = load_profile(profile).key_prefix
    if same is not None:
        assert ExperimentResource(location=location, overrides={"key_prefix": same}
                                  ).settings.key_prefix == same
    assert ExperimentResource(location=location).settings.key_prefix == same


def test_plain_overrides_merge_like_load_profile() -> None:
    """Launch overrides are laid over the profile exactly as ``load_profile`` merges them:
    a null clears a nullable setting, a preset is a plain string."""
    plain = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "strict_grid": None,
                           "eval_grid": "D_prime"},
             "sampling": {"n": 2}, "answer_check": "last_boxed",
             "policy": {"dtype": "float32", "vllm": {"max_lora_rank": 16}},
             "training": {"methods": ["dpo", "sft"], "sweeps": {"dpo_beta": None}}}
    got = layered_profile("paper", [(LAUNCH, plain)])
    assert got == load_profile("paper", plain)
    assert got.chain_sum.strict_grid is None and got.training.sweeps.dpo_beta is None
    assert got.chain_sum.eval_grid == "D_prime"
    assert layered_profile("paper", [(LAUNCH, {})]) == load_profile("paper")


@pytest.mark.parametrize(("plain", "message"), [
    ({"sampling": {"m": 2}}, "sampling.m"),
    ({"policy": {"dtype": "float33"}}, "float33"),
    ({"sampling": {"n": None}}, "sampling.n"),  # not a nullable setting
])
def test_malformed_overrides_name_the_field(plain: dict, message: str) -> None:
    with pytest.raises(ProfileError, match=LAUNCH) as err:
        layered_profile("demo", [(LAUNCH, plain)])
    assert message in str(err.value)


def test_out_of_range_override_fails_the_resource_naming_the_field() -> None:
    """Validated when the resource is set up, i.e. when a run starts, before any step."""
    resources = make_resources("demo", "out", {"sampling": {"n": 0}})
    with pytest.raises(dg.DagsterResourceFunctionError) as err:
        with dg.build_resources(resources):
            pass
    assert isinstance(err.value.__cause__, ProfileError)
    message = str(err.value.__cause__)
    # blamed on the overrides that set it (here the location's), with the value, not on the
    # (valid) profile file
    assert "location's overrides" in message and "sampling.n = 0" in message, message
    assert "demo.yaml" not in message


def test_a_failing_override_is_blamed_on_it_in_the_run_log(tmp_path: Path) -> None:
    """A run launched with ``sampling.n: 0`` fails before any step, and its run log's failure
    names the launch override and its value, not the profile file."""
    @dg.asset
    def nothing(experiment: ExperimentResource) -> None:
        pass

    launch = {"resources": {"experiment": {"config": {
        "overrides": {"sampling": {"n": 0}}}}}}
    result = dg.materialize([nothing], resources=make_resources("demo", str(tmp_path / "out")),
                            run_config=launch, raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.is_failure]
    text = "\n".join(str(e.event_specific_data) for e in failures)
    assert "this run's launch overrides" in text and "sampling.n = 0" in text, text
    assert "demo.yaml" not in text


def test_the_location_overrides_are_blamed_for_their_own_values() -> None:
    from resources.experiment import layered_profile

    with pytest.raises(ProfileError, match="location") as err:
        layered_profile("demo", [("the location", {"sampling": {"temperature": -1}}),
                                 ("the launch", {"sampling": {"n": 2}})])
    assert "sampling.temperature = -1" in str(err.value)
    # a launch override that repairs the location's value is what the run uses
    assert layered_profile("demo", [("the location", {"sampling": {"n": 0}}),
                                    ("the launch", {"sampling": {"n": 2}})]).sampling.n == 2


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resources here name the output folder ``out``: relative, so a run's residency log
    (``out/residency/``) lands in the test's folder, not the repository's."""
    monkeypatch.chdir(tmp_path)


class FakeBackend:
    """Stands in for an engine: records loads and closes (no model, no device)."""

    def __init__(self, model: str, device: str, backend: str, log: list[str]) -> None:
        self.name, self.tokenizer, self.device, self.backend = model, None, device, backend
        self.log, self.closed = log, False
        log.append(f"load {model}@{device}")

    def close(self) -> None:
        self.closed = True
        self.log.append(f"close {self.name}@{self.device}")


@pytest.fixture
def fake_engines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []

    def fake_open(backend: str, model: str, **kwargs: Any) -> FakeBackend:
        return FakeBackend(Path(model).name, kwargs["device"], backend, log)

    monkeypatch.setattr(inference_module, "open_backend", fake_open)
    return log


def _engines(tiny: Path, policy: dict, judge: dict) -> dict:
    return make_resources("demo", "out", {
        "policy": {"model": str(tiny), **policy},
        "judges": {"strong": {"kind": "llm", "model": "judge", **judge}}})


def test_one_exclusive_engine_at_a_time(tiny_model_dir: Path, fake_engines: list[str]) -> None:
    cuda = {"device": "cuda:0"}
    with dg.build_resources(_engines(tiny_model_dir, cuda, cuda)) as live:
        inference: InferenceResource = live.inference
        policy = inference.policy_backend()
        assert inference.policy_backend() is policy  # loaded once
        judge = inference.strong_judge(max_new_tokens=8)
        assert policy.closed and inference.loaded_roles() == ["strong_judge"]
        assert judge.backend.name == "judge" and judge.batch_size == 16
        again = inference.policy_backend()
        assert judge.backend.closed and again is not policy
        assert inference.loaded_roles() == ["policy"]
        inference.release()  # the training path calls this first
        assert again.closed and inference.loaded_roles() == []
    assert fake_engines == ["load model@cuda:0", "close model@cuda:0", "load judge@cuda:0",
                            "close judge@cuda:0", "load model@cuda:0", "close model@cuda:0"]


def test_vllm_is_exclusive_and_cpu_engines_share(tiny_model_dir: Path,
                                                 fake_engines: list[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # residency only: the engines are fakes, so the context each vLLM engine would get
    # (tests/config/test_judge_context.py) is the profile's as written
    monkeypatch.setattr("resources.inference.vllm_options",
                        lambda settings, *_args, **_kw: settings.vllm.model_dump())
    with dg.build_resources(_engines(tiny_model_dir, {}, {})) as live:
        live.inference.policy_backend()
        live.inference.strong_judge(max_new_tokens=8)
        assert live.inference.loaded_roles() == ["policy", "strong_judge"]
    assert fake_engines[-2:] == ["close model@cpu", "close judge@cpu"]  # teardown
    fake_engines.clear()
    vllm = {"backend": "vllm"}  # on any device: vLLM claims its memory up front
    with dg.build_resources(_engines(tiny_model_dir, vllm, vllm)) as live:
        live.inference.policy_backend()
        live.inference.strong_judge(max_new_tokens=8)
        assert live.inference.loaded_roles() == ["strong_judge"]
    assert fake_engines[:3] == ["load model@cpu", "close model@cpu", "load judge@cpu"]
    fake_engines.clear()
    with dg.build_resources(_engines(tiny_model_dir, {}, vllm)) as live:
        live.inference.policy_backend()  # a CPU transformers engine is not exclusive
        live.inference.strong_judge(max_new_tokens=8)
        assert live.inference.loaded_roles() == ["policy", "strong_judge"]


def test_rubric_judge_loads_nothing(tiny_model_dir: Path, fake_engines: list[str]) -> None:
    resources = make_resources("demo", "out", {"policy": {"model": str(tiny_model_dir)}})
    with dg.build_resources(resources) as live:
        assert live.inference.strong_judge(max_new_tokens=8).name == "rubric"
        assert live.inference.loaded_roles() == [] and fake_engines == []


def test_outside_a_run_is_a_clear_error(tiny_model_dir: Path) -> None:
    resource = InferenceResource(experiment=ExperimentResource(
        location=ExperimentLocation(profile="demo", output_dir="out")))
    with pytest.raises(dg.DagsterInvariantViolationError, match="outside a run"):
        resource.policy_backend()


def test_unknown_model_fails_before_loading(fake_engines: list[str]) -> None:
    with dg.build_resources(make_resources("demo", "out", {"policy": {"model": "gpt-17"}})) as live:
        with pytest.raises(dg.Failure, match="policy: unknown model name 'gpt-17'"):
            live.inference.policy_backend()
    assert fake_engines == []


def _probe_defs(tiny: Path, seen: dict) -> dg.Definitions:
    @dg.asset
    def first(experiment: ExperimentResource, inference: InferenceResource) -> None:
        seen["first"] = inference.policy_backend()
        seen["settings"] = (experiment.settings, inference.experiment.settings)

    @dg.asset(deps=[first])
    def second(inference: InferenceResource) -> None:
        seen["second"] = inference.policy_backend()
        seen["closed_during_run"] = seen["first"].closed

    resources = make_resources("demo", "out", {"policy": {"model": str(tiny)},
                                               "sampling": {"n": 2}})
    return dg.Definitions(assets=[first, second], resources=resources,
                          executor=dg.in_process_executor)


def test_launch_config_reaches_both_resources_and_the_engine_loads_once_per_run(
        tiny_model_dir: Path, fake_engines: list[str]) -> None:
    seen: dict = {}
    job = _probe_defs(tiny_model_dir, seen).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process().success
    own, via_inference = seen["settings"]
    assert own == via_inference and own.sampling.n == 2  # make_resources' overrides
    assert seen["first"] is seen["second"] and not seen["closed_during_run"]
    assert seen["first"].closed and fake_engines == ["load model@cpu", "close model@cpu"]

    launch = {"policy": {"model": str(tiny_model_dir), "batch_size": 5, "dtype": "float32"},
              "sampling": {"n": 3}, "chain_sum": {"grid": "D_prime", "strict_grid": None}}
    result = job.execute_in_process(run_config={"resources": {"experiment": {"config": {
        "overrides": launch}}}})
    assert result.success
    own, via_inference = seen["settings"]
    assert own == via_inference
    assert (own.sampling.n, own.policy.batch_size, own.chain_sum.grid,
            own.chain_sum.strict_grid) == (3, 5, "D_prime", None)


def test_bad_launch_config_is_refused_before_any_step(tiny_model_dir: Path) -> None:
    """The profile's model checks the launch overrides when the run starts: the run fails
    naming the setting and its value, and no step starts."""
    job = _probe_defs(tiny_model_dir, {}).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(run_config={"resources": {"experiment": {"config": {
        "overrides": {"policy": {"dtype": "float33"}}}}}}, raise_on_error=False)
    assert not result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_START"]
    text = "\n".join(str(e.event_specific_data) for e in result.all_events if e.is_failure)
    assert "float33" in text and LAUNCH in text and "policy.dtype" in text, text


def test_tiny_model_samples_through_the_resource(tiny_model_dir: Path) -> None:
    from saturated_dag.generation.base import SamplingParams

    resources = make_resources("demo", "out", {"policy": {"model": str(tiny_model_dir),
                                                          "batch_size": 2}})
    with dg.build_resources(resources) as live:
        backend = live.inference.policy_backend()
        (samples,) = backend.sample([backend.render("1 + 2")],
                                    SamplingParams(n=2, temperature=1.0, max_new_tokens=4))
        assert len(samples) == 2 and live.inference.loaded_roles() == ["policy"]


def test_every_job_runs_in_process() -> None:
    """UI materialisations and sensor runs use the implicit asset job: the same executor as
    the named jobs, in-process for the demo (``execution.model_steps: one_at_a_time``)."""
    import definitions
    from jobs.executor import step_executor

    defs = definitions.defs
    expected = step_executor(load_profile(definitions.PROFILE)).name
    assert expected == dg.in_process_executor.name
    implicit = defs.resolve_implicit_global_asset_job_def()
    jobs = [implicit, *defs.resolve_all_job_defs()]
    assert {job.name: job.executor_def.name for job in jobs} == {
        job.name: expected for job in jobs}
