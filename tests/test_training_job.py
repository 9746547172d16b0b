"""The training job and the σ-RRHF config: one validated object from the asset to the
trainer, and a config class shaped like TRL's (compared with the library's own parsing)."""

import dataclasses
import json
from pathlib import Path

import pytest
from transformers import HfArgumentParser, TrainingArguments

from assets.adapters import training_job
from saturated_dag.config import load_profile
from saturated_dag.experiments import experiment_plan
from saturated_dag.training.config import RrhfSettings, settings_for
from saturated_dag.training.job import TrainingJob
from saturated_dag.training.rrhf_trainer import RrhfConfig


def _rrhf_job(tmp_path: Path) -> TrainingJob:
    """The demo's first σ-RRHF adapter with λ = 0.5, as the adapter asset builds its job."""
    profile = load_profile("demo")
    adapter = next(a for a in experiment_plan(profile)["chain_sum"].adapters
                   if a.method == "rrhf")
    adapter = adapter.with_settings(profile.training, {"rrhf_rank_weight": 0.5})
    return training_job(profile, "chain_sum", adapter, profile.policy, tmp_path / "d.parquet",
                        tmp_path / "out", "key", str(tmp_path))


def test_the_job_survives_json_and_builds_the_trainer_settings_of_the_cell(
        tmp_path: Path) -> None:
    job = _rrhf_job(tmp_path)
    again = TrainingJob.from_json(job.to_json())
    assert again == job
    settings = again.trainer_settings()
    assert isinstance(settings, RrhfSettings) and settings.rank_weight == 0.5
    # exactly what the cell trains (Experiment.training), the profile's values elsewhere
    profile = job.profile
    adapter = next(a for a in experiment_plan(profile)["chain_sum"].adapters
                   if a.method == "rrhf").with_settings(profile.training,
                                                         {"rrhf_rank_weight": 0.5})
    assert settings == settings_for("rrhf", adapter.training(profile.training))
    assert settings.max_length == profile.training.max_length


def test_a_bad_job_is_refused_naming_its_field_on_either_side(tmp_path: Path) -> None:
    job = json.loads(_rrhf_job(tmp_path).to_json())
    with pytest.raises(ValueError, match=r"invalid training job received.*\n.*batch_size"):
        TrainingJob.from_json(json.dumps({**job, "batch_size": 0}), "training job received")
    with pytest.raises(ValueError, match="bacth_size"):
        TrainingJob.from_json(json.dumps({**job, "bacth_size": 8}))
    with pytest.raises(ValueError, match="learning_rate"):  # an override is validated too
        TrainingJob.from_json(json.dumps({**job, "training_overrides": {"learning_rate": -1}}))


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
