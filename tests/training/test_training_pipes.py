"""Issue 14 item 5: an adapter trains in a child process through Dagster Pipes.

A small asset trains an SFT adapter on the tiny model with ``train_with_pipes``: the child's
progress lines reach the run's log through Pipes, its metadata lands on the materialisation,
the data version it reports is the hash of the adapter's weights, and the parent's policy
engine is released before the child starts. A child that fails gives a ``dg.Failure`` that
says so and shows the child's last lines.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from resources import InferenceResource, make_resources
from resources.training import train_with_pipes
from saturated_dag.config import SamplingSettings, TrainingSettings
from saturated_dag.data.questions import validation_questions
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.infra.residency import read_events, violations
from saturated_dag.infra.shards import file_fingerprint
from saturated_dag.profiles import load_profile
from saturated_dag.training.folders import ADAPTER_WEIGHTS
from saturated_dag.training.request import TrainingRequest

PROMPT = "<|user|>Compute the following step by step:\n1 + 2 =<|end|><|assistant|>"
OVERRIDES = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                  "strict_grid": None, "eval_questions_per_cell": 1},
    "sampling": {"n": 1, "max_new_tokens": 4},
    "training": {"splits": ["saturated"], "scorers": ["entropy"], "methods": ["sft"],
                 "epochs": 1, "batch_size": 2, "per_device_batch_size": 2,
                 "learning_rate": 1e-2, "max_length": 96, "lora_r": 4, "lora_alpha": 8,
                 "validation_questions_per_cell": 1},
}


def _adapter_asset(work: Path, out: Path, data: Path, seen: dict[str, Any]
                   ) -> dg.AssetsDefinition:
    @dg.asset(name="adapter")
    def adapter(context: dg.AssetExecutionContext,
                inference: InferenceResource) -> dg.MaterializeResult:
        profile = inference.experiment.settings
        policy = inference.policy_settings()
        inference.policy_backend(context.log)  # an engine the training must not share with
        seen["before"] = inference.loaded_roles()
        request = TrainingRequest(
            task="chain_sum", method="sft", training=profile.training,
            sampling=profile.sampling, answer_check=profile.answer_check,
            validation=validation_questions(profile, "chain_sum"), base_model=policy.model,
            batch_size=policy.batch_size, chat_template=policy.chat_template,
            enable_thinking=policy.enable_thinking, data=str(data), out_dir=str(out),
            record={"cache_key": "test"})
        trained = train_with_pipes(context, [request], work, inference=inference)
        (record,) = trained.records
        seen["after"], seen["record"] = inference.loaded_roles(), record
        seen["data_version"] = trained.data_version
        return dg.MaterializeResult(metadata={"own": "parent", **trained.metadata},
                                    data_version=dg.DataVersion(trained.data_version))

    return adapter


def _sft_data(path: Path) -> Path:
    atomic_write_parquet(pl.DataFrame({"prompt": [PROMPT] * 4,
                                       "completion": ["1 + 2 = 3 \\boxed{3}"] * 4}), path)
    return path  # as the pipeline writes a training set: with its content hash


def _materialise(tmp_path: Path, model: Path, data: Path, seen: dict
                 ) -> tuple[dg.ExecuteInProcessResult, list[str]]:
    """The run's result and every message of its log (the child's lines included)."""
    resources = make_resources("demo", str(tmp_path / "outputs"),
                               {**OVERRIDES, "policy": {"model": str(model), "batch_size": 2}})
    asset = _adapter_asset(tmp_path / "work", tmp_path / "adapter", data, seen)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([asset], resources=resources, raise_on_error=False,
                                instance=instance)
        log = [entry.user_message for entry in instance.all_logs(result.run_id)]
    return result, log


def test_training_reports_logs_metadata_and_data_version_through_pipes(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    seen: dict = {}
    result, log = _materialise(tmp_path, tiny_model_dir, _sft_data(tmp_path / "data.parquet"),
                               seen)
    assert result.success
    assert seen["before"] == ["policy"] and seen["after"] == []  # released for the child
    record = seen["record"]
    weights = Path(record["adapter_dir"]) / ADAPTER_WEIGHTS
    assert weights.is_file() and record["best_epoch"] == 1 and len(record["epochs"]) == 1

    (event,) = result.get_asset_materialization_events()
    materialization = event.materialization
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert metadata["own"] == "parent"  # the asset's own metadata and the child's, together
    assert metadata["best_epoch"] == 1 and metadata["epochs_trained"] == 1
    assert metadata["adapter_weights_version"] == file_fingerprint(weights)
    assert metadata["training_seconds"] > 0
    assert materialization.tags["dagster/data_version"] == file_fingerprint(weights)
    assert seen["data_version"] == file_fingerprint(weights)

    assert any("training sft on 4 rows" in m for m in log), log  # a line the child logged
    assert any("[pipes] external process successfully opened" in m for m in log)

    # the residency log: the engine closed before the child started, the child its own process
    (path,) = (tmp_path / "outputs" / "residency").glob("*.jsonl")
    events = read_events(path)
    assert [e["event"] for e in events] == ["loading", "loaded", "closed", "train_start",
                                            "child_start", "child_end", "train_end"]
    parent, child = events[0]["pid"], events[4]["pid"]
    assert child != parent and events[3]["pid"] == events[6]["pid"] == parent
    assert events[3]["engines_held"] == [] and events[0]["step"] == "adapter"
    assert violations(events) == []


def test_the_child_samples_validation_in_batches_of_its_own_size() -> None:
    """``paper``'s policy batch (1,024, the vLLM engine's) is not the validation sampler's
    beside the trainer; the key of an adapter ignores the setting (samples do not depend on
    it)."""
    from saturated_dag.experiments import main_matrix
    from saturated_dag.training.resolve import adapter_cache_key, adapter_request

    paper = load_profile("paper")  # the rehearsal's structure, with paper's policy batch
    profile = load_profile("rehearsal").model_copy(update={"policy": paper.policy})
    exp = main_matrix(profile.training)[0]
    request = adapter_request(profile, "chain_sum", exp, profile.policy, Path("d"), Path("o"), "k",
                              {})
    assert profile.policy.batch_size == 1024
    assert request.batch_size == profile.training.validation_batch_size == 64
    data = pl.DataFrame({"prompt": ["p"], "completion": ["c"]})
    other = profile.model_copy(update={"training": profile.training.model_copy(
        update={"validation_batch_size": 8})})
    assert (adapter_cache_key(profile, "chain_sum", exp, "v", {}, data)
            == adapter_cache_key(other, "chain_sum", exp, "v", {}, data))


def test_failing_child_is_a_clear_failure(tmp_path: Path, tiny_model_dir: Path) -> None:
    missing = tmp_path / "no-such-data.parquet"
    seen: dict = {}
    result, _ = _materialise(tmp_path, tiny_model_dir, missing, seen)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    message = failure.step_failure_data.error.message
    assert f"training {tmp_path / 'adapter'} failed" in message
    assert "failed with code 1" in message  # the child's exit status
    assert "the child's last lines" in message and "no-such-data.parquet" in message
    assert "Traceback" in message  # the child's own traceback, from its log
    assert failure.step_failure_data.user_failure_data.metadata["training_log"].value == str(
        tmp_path / "work" / "train.log")
    assert not (tmp_path / "adapter").exists()


def test_release_happens_before_the_child_starts(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The engine is closed when the Pipes client is called, not after the child ran."""
    seen: dict = {}
    closed_when_started: list[list[str]] = []

    class Probe(dg.PipesSubprocessClient):
        def run(self, *, context: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            closed_when_started.append(list(seen["inference"].loaded_roles()))
            raise RuntimeError("stopped before starting the child")

    @dg.asset
    def adapter(context: dg.AssetExecutionContext, inference: InferenceResource) -> None:
        seen["inference"] = inference
        inference.policy_backend()
        with pytest.raises(dg.Failure, match="stopped before starting the child"):
            train_with_pipes(context, [TrainingRequest(
                task="chain_sum", method="sft", training=TrainingSettings(),
                sampling=SamplingSettings(), answer_check="last_boxed", validation=[],
                base_model="m", batch_size=1, data="d", out_dir="x")], tmp_path / "work",
                inference=inference, client=Probe())

    resources = make_resources("demo", str(tmp_path), {"policy": {"model": str(tiny_model_dir)}})
    assert dg.materialize([adapter], resources=resources).success
    assert closed_when_started == [[]]
