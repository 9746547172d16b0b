"""One table of methods: each training method is a ``methods.MethodSpec`` (what the plan and the
tables read) and a ``training.config.MethodTraining`` (what trains it), keyed by the same names
as ``config.Method``; training reads the entry, and an unknown name is refused in one place."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import polars as pl
import pytest

from saturated_dag.config import Method, TrainingSettings
from saturated_dag.methods import METHODS
from saturated_dag.training.config import (
    METHOD_TRAINING,
    RECORD_ENTRIES,
    method_training,
    settings_record,
    weight_decay,
)
from tests.conftest import REPO_ROOT

PROMPT = "<|user|>Compute the following step by step:\n1 + 2 =<|end|><|assistant|>"
GOOD, BAD = "1 + 2 = 3 \\boxed{3}", "The answer probably is 3 \\boxed{3}"
TINY = {"epochs": 1, "batch_size": 2, "per_device_batch_size": 2, "max_length": 96,
        "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0}


def _expected() -> dict[str, tuple[type, type]]:
    """Each method's config and trainer classes, named independently of the table."""
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    from saturated_dag.training.rrhf_trainer import RrhfConfig, RrhfTrainer

    return {"dpo": (DPOConfig, DPOTrainer), "rrhf": (RrhfConfig, RrhfTrainer),
            "sft": (SFTConfig, SFTTrainer), "raft": (SFTConfig, SFTTrainer)}


def test_both_tables_hold_the_profiles_methods_in_the_same_order() -> None:
    from saturated_dag.training.train import METHODS as TRAINER_METHODS

    names = get_args(Method)
    assert tuple(METHODS) == tuple(METHOD_TRAINING) == TRAINER_METHODS == names
    assert set(_expected()) == set(names)


@pytest.mark.parametrize("name", get_args(Method))
def test_every_entry_is_complete(name: str) -> None:
    spec, entry = METHODS[name], METHOD_TRAINING[name]
    assert spec.name == entry.name == name
    assert spec.label and spec.description and spec.dataset
    assert entry.columns and len(set(entry.columns)) == len(entry.columns)
    assert "prompt" in entry.columns
    assert callable(entry.config) and callable(entry.trainer)
    fields = set(TrainingSettings.model_fields)
    assert spec.own_settings <= fields
    assert set(entry.record.values()) <= fields  # each record entry holds a setting
    assert not set(entry.record) & set(RECORD_ENTRIES)  # after the shared ones, never over them
    assert set(entry.summary.values()) <= set(entry.record)  # a reader is shown recorded ones
    assert set(entry.recorded_later) <= set(entry.summary.values())
    assert weight_decay(name) == entry.weight_decay
    shared = [*RECORD_ENTRIES, "lora"]
    assert list(settings_record(name, TrainingSettings())) == [*shared, *entry.record]


@pytest.mark.parametrize("name", get_args(Method))
def test_the_entry_builds_the_methods_config_class(name: str) -> None:
    from saturated_dag.training.train import trainer_config

    config_class, _ = _expected()[name]
    config = trainer_config(name, TrainingSettings(), "/nonexistent", "float32")
    assert type(config) is config_class
    assert config.report_to == [] and config.weight_decay == METHOD_TRAINING[name].weight_decay


def _data(name: str) -> pl.DataFrame:
    if name == "dpo":
        return pl.DataFrame({"prompt": [PROMPT] * 2, "chosen": [GOOD] * 2, "rejected": [BAD] * 2})
    if name == "rrhf":
        return pl.DataFrame({"question_id": ["q0"] * 3 + ["q1"] * 3, "prompt": [PROMPT] * 6,
                             "completion": [GOOD, BAD, GOOD + " ok"] * 2,
                             "score": [1.0, 0.0, 0.5] * 2})
    return pl.DataFrame({"prompt": [PROMPT] * 2, "completion": [GOOD, BAD]})


@pytest.mark.parametrize("name", get_args(Method))
def test_the_entry_builds_the_methods_trainer(
        name: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The trainer the pipeline trains with (``train._build_trainer``), on the tiny model: the
    method's trainer class with its config class, on the columns the entry names."""
    from saturated_dag.generation.models import load_model
    from saturated_dag.training.train import _build_trainer

    config_class, trainer_class = _expected()[name]
    model, tokenizer = load_model(str(tiny_model_dir))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    data = _data(name).with_columns(extra=pl.lit("not read"))
    trainer = _build_trainer(name, model, tokenizer, data, TrainingSettings(**TINY),
                             str(tmp_path / "t"), "float32")
    assert type(trainer) is trainer_class and type(trainer.args) is config_class
    if name != "rrhf":  # TRL's trainers read the entry's columns (σ-RRHF: one row a question)
        assert set(METHOD_TRAINING[name].columns) <= set(trainer.train_dataset.column_names)
        assert "extra" not in trainer.train_dataset.column_names
    with pytest.raises(ValueError, match=rf"{name}: training set lacks columns \['prompt'\]"):
        _build_trainer(name, model, tokenizer, data.drop("prompt"), TrainingSettings(**TINY),
                       str(tmp_path / "u"), "float32")


def _refusals(tmp_path: Path) -> dict[str, Any]:
    from saturated_dag.training.train import _build_trainer, train_adapter, trainer_config

    return {
        "method_training": lambda: method_training("ppo"),
        "trainer_config": lambda: trainer_config("ppo", TrainingSettings(), "/x", "float32"),
        "_build_trainer": lambda: _build_trainer("ppo", None, None, pl.DataFrame(),
                                                 TrainingSettings(), "/x", "float32"),
        "train_adapter": lambda: train_adapter("ppo", "/nonexistent", pl.DataFrame(),
                                               TrainingSettings(), tmp_path / "x"),
        "settings_record": lambda: settings_record("ppo", TrainingSettings()),
        "weight_decay": lambda: weight_decay("ppo"),
    }


@pytest.mark.parametrize("route", ["method_training", "trainer_config", "_build_trainer",
                                   "train_adapter", "settings_record", "weight_decay"])
def test_an_unknown_method_is_one_error_naming_the_known_ones(
        route: str, tmp_path: Path) -> None:
    """Every route refuses it with the registry's error (raised by ``methods.method``, the one
    place that raises it), before loading anything."""
    with pytest.raises(ValueError) as refused:
        _refusals(tmp_path)[route]()
    assert str(refused.value) == ("unknown training method 'ppo'; known: dpo, rrhf, sft, raft")
    raised_in = refused.traceback[-1]
    assert (Path(str(raised_in.path)).name, raised_in.name) == ("methods.py", "method")
    assert not (tmp_path / "x").exists()


def test_the_trainer_modules_hold_no_check_of_a_method_name() -> None:
    """Training reads the entry: no branch on a method's name, no second unknown-name error."""
    root = REPO_ROOT / "saturated_dag" / "training"
    for module in ("train.py", "config.py"):
        text = (root / module).read_text()
        assert "unknown training method" not in text
        assert "method ==" not in text and "method in (" not in text


def test_the_tables_stay_cheap_to_import() -> None:
    """The registry and the training table import no torch, TRL, transformers, PEFT nor
    datasets: the tables, the plan and a record's readers import them."""
    code = ("import sys, saturated_dag.methods, saturated_dag.training.config; "
            "print(sorted(m for m in ('torch', 'trl', 'transformers', 'peft', 'datasets') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_an_entry_is_a_frozen_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        METHOD_TRAINING["dpo"].columns = ()  # type: ignore[misc]
