"""The training request and the σ-RRHF config: one validated object from the asset to the
trainer, and a config class shaped like TRL's (compared with the library's own parsing)."""

import dataclasses
import json
from pathlib import Path

import pytest
from transformers import HfArgumentParser, TrainingArguments

from saturated_dag.config import TrainingSettings
from saturated_dag.experiments import experiment_plan
from saturated_dag.profiles import load_profile
from saturated_dag.training.config import (
    resolve_dtype,
    settings_record,
    settings_summary,
    training_of_record,
)
from saturated_dag.training.request import TrainingRequest
from saturated_dag.training.resolve import adapter_request
from saturated_dag.training.rrhf_trainer import RrhfConfig
from saturated_dag.training.train import lora_config, trainer_config


def _rrhf_request(tmp_path: Path) -> TrainingRequest:
    """The demo's first σ-RRHF adapter with λ = 0.5, as the adapter asset builds its request."""
    profile = load_profile("demo")
    adapter = next(a for a in experiment_plan(profile)["chain_sum"].adapters
                   if a.method == "rrhf")
    adapter = adapter.with_settings(profile.training, {"rrhf_rank_weight": 0.5})
    return adapter_request(profile, "chain_sum", adapter, profile.policy, tmp_path / "d.parquet",
                           tmp_path / "out", "key", {})


def test_the_job_survives_json_and_builds_the_trainer_of_the_cell(tmp_path: Path) -> None:
    request = _rrhf_request(tmp_path)
    again = TrainingRequest.from_json(request.to_json())
    assert again == request
    training = again.training
    # exactly what the cell trains (Experiment.training), the profile's values elsewhere
    profile = load_profile("demo")
    adapter = next(a for a in experiment_plan(profile)["chain_sum"].adapters
                   if a.method == "rrhf").with_settings(profile.training,
                                                         {"rrhf_rank_weight": 0.5})
    assert training == adapter.training(profile.training)
    assert training.max_length == profile.training.max_length
    config = trainer_config("rrhf", training, "/nonexistent", resolve_dtype(training.dtype))
    assert isinstance(config, RrhfConfig) and config.rank_weight == 0.5
    assert config.max_length == profile.training.max_length


CHANGED = TrainingSettings(
    epochs=2, batch_size=16, per_device_batch_size=4, learning_rate=3e-4, max_length=512,
    seed=7, dtype="bfloat16", gradient_checkpointing=True, lora_r=8, lora_alpha=4,
    lora_dropout=0.2, dpo_beta=0.5, dpo_nll_weight=0.3, rrhf_rank_weight=0.7,
    rrhf_use_sft=False, rrhf_hinge=False, rrhf_logistic_weight=False,
    rrhf_sft_token_mean=False)
"""Every setting a settings record holds, away from its default."""

_COMMON = {"epochs": 2, "batch_size": 16, "per_device_batch_size": 4, "learning_rate": 0.0003,
           "warmup_ratio": 0.1, "weight_decay": 0.01, "max_length": 512, "seed": 7,
           "logging_steps": 1, "dtype": "bfloat16", "gradient_checkpointing": True,
           "lora": {"r": 8, "alpha": 4, "dropout": 0.2,
                    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}}
RECORDED_BEFORE = {
    "dpo": {**_COMMON, "weight_decay": 0.0, "beta": 0.5, "loss_type": "sigmoid",
            "nll_weight": 0.3},
    "rrhf": {**_COMMON, "rank_weight": 0.7, "use_sft": False, "hinge": False,
             "logistic_weight": False, "sft_token_mean": False},
    "sft": _COMMON, "raft": _COMMON}
"""``dataclasses.asdict(settings_for(method, CHANGED))`` at 7abc541, the last commit with the
per-method settings classes: what every ``training_config.json`` written before holds under
``settings``, in its order (DPO's weight decay in its place among the common keys)."""


@pytest.mark.parametrize("method", ["dpo", "rrhf", "sft", "raft"])
def test_the_settings_record_keeps_the_keys_values_and_order_adapters_recorded(
        method: str) -> None:
    """``training_config.json``'s ``settings`` stays what the model cards, the runs table and
    the adapter metadata read, written before and after the per-method settings classes."""
    record = settings_record(method, CHANGED)
    assert list(record.items()) == list(RECORDED_BEFORE[method].items())
    assert list(record["lora"]) == ["r", "alpha", "dropout", "target_modules"]
    assert json.loads(json.dumps(record)) == record  # plain JSON values
    settings_summary(method, record)  # its readers read it


@pytest.mark.parametrize("method", ["dpo", "rrhf", "sft", "raft"])
def test_a_record_builds_the_trainer_its_settings_built(method: str) -> None:
    """``training_of_record`` (the GPU check's route from its recorded cases) gives back the
    settings a record was made from: the same trainer and LoRA configs."""
    again = TrainingSettings(**training_of_record(settings_record(method, CHANGED)))
    for training in (CHANGED, again):
        assert settings_record(method, training) == RECORDED_BEFORE[method]
    built = [trainer_config(method, t, "/nonexistent", "bfloat16").to_dict()
             for t in (CHANGED, again)]
    assert built[0] == built[1]
    assert lora_config(again).to_dict() == lora_config(CHANGED).to_dict()


def test_a_bad_job_is_refused_naming_its_field_on_either_side(tmp_path: Path) -> None:
    request = json.loads(_rrhf_request(tmp_path).to_json())
    with pytest.raises(ValueError, match=r"invalid training request received.*\n.*batch_size"):
        TrainingRequest.from_json(json.dumps({**request, "batch_size": 0}),
                                  "training request received")
    with pytest.raises(ValueError, match="bacth_size"):
        TrainingRequest.from_json(json.dumps({**request, "bacth_size": 8}))
    with pytest.raises(ValueError, match="learning_rate"):  # its settings are validated too
        TrainingRequest.from_json(json.dumps({**request, "training": {
            **request["training"], "learning_rate": -1}}))


def test_rrhf_config_is_a_training_arguments_class_like_trls() -> None:
    """Parsed by transformers' own argument parser, every σ-RRHF field with its help text,
    validated at construction (as TRL's DPOConfig is)."""
    own = [f for f in dataclasses.fields(RrhfConfig)
           if f.name not in {g.name for g in dataclasses.fields(TrainingArguments)}]
    assert {f.name for f in own} == {"rank_weight", "use_sft", "hinge", "logistic_weight",
                                     "sft_token_mean", "max_length"}
    assert all(f.metadata.get("help") for f in own)
    (parsed,) = HfArgumentParser(RrhfConfig).parse_args_into_dataclasses(
        ["--output_dir", "x", "--rank_weight", "0.5", "--hinge", "false", "--report_to", "none"])
    assert isinstance(parsed, TrainingArguments)
    assert (parsed.rank_weight, parsed.hinge, parsed.use_sft) == (0.5, False, True)
    assert parsed.loss_config.rank_weight == 0.5 and not parsed.loss_config.hinge
    with pytest.raises(ValueError, match="trains nothing"):
        RrhfConfig(output_dir="x", rank_weight=0.0, use_sft=False, report_to="none")
    with pytest.raises(ValueError, match="rank_weight must be >= 0"):
        RrhfConfig(output_dir="x", rank_weight=-0.1, report_to="none")


def test_a_request_of_plain_settings_trains_without_a_profile(tmp_path: Path,
                                                             tiny_model_dir: Path) -> None:
    """A request holds plain settings (no profile in it, none loaded): built by hand, sent
    through its JSON, it trains and publishes its adapter with the validation pass@1 of the
    questions it carries."""
    from saturated_dag.training.runner import InThisProcess, run_trainings
    from tests.training.test_adapter_partitions import _sft_requests

    request = _sft_requests(tmp_path, tiny_model_dir)[0]
    sent = json.loads(request.to_json())
    assert "profile" not in sent and "training_overrides" not in sent
    assert sent["validation"][0]["question_id"] == "v0"
    (record,) = run_trainings([TrainingRequest.from_json(json.dumps(sent))], InThisProcess())
    assert (Path(record["adapter_dir"]) / "adapter_model.safetensors").is_file()
    assert record["cache_key"] == "a" and record["epochs"][0]["val_pass@1"] is not None
    # the kept epoch's validation (the runner's validator), published beside the adapter:
    # one row per validation question, whose mean is the kept epoch's val pass@1
    import polars as pl

    from saturated_dag.training.folders import VALIDATION_FILE, VALIDATION_SAMPLES_FILE

    folder = Path(record["adapter_dir"])
    kept = pl.read_parquet(folder / VALIDATION_FILE)
    assert kept["question_id"].to_list() == [q.question_id for q in request.validation]
    best = record["epochs"][record["best_epoch"] - 1]["val_pass@1"]
    assert (kept["correct"] / kept["n"]).mean() == pytest.approx(best)
    assert pl.read_parquet(folder / VALIDATION_SAMPLES_FILE).height == kept["n"].sum()
