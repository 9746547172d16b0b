"""Issue 46, item 1: every reader of an adapter checks that it is the adapter.

The faults a probe of 5903d61 found: (a) ``lora_B`` of one module changed in place in
``adapter_model.safetensors``, and the eval report ran on the altered weights and succeeded;
(b) ``saturated/sft/current`` pointed at a key folder copied from ``saturated/dpo_entropy``,
and the ``sft`` eval report evaluated DPO-entropy weights with exit code 0. Now the folder's
record (``result.json``: where it was trained, its cache key and its weights' hash, the
adapter's data version; ``training_config.json``: method and cache key) is checked before any
reader reads it (``assets/_adapter_files.adapter_dir``, ``training.folders.check_adapter``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.training.folders import ADAPTER_WEIGHTS, RESULT_FILE
from tests.pipeline import (
    ONE_SFT_ADAPTER,
    adapter_folder,
    by_name,
    graph,
    materialize,
    resources,
    seed_adapter_folder,
)
from tests.scoring_data import store_pool_and_partitions

OVERRIDES = dict(ONE_SFT_ADAPTER)
TRAINING_RECORD = "training_config.json"


def _report_assets(overrides: dict) -> tuple[list, list]:
    """The graph, and the slice that trains and evaluates the one SFT adapter."""
    everything, _ = graph("demo", overrides)
    wanted = [a for a in everything if isinstance(a, dg.AssetsDefinition)
              and a.key.path[0] == "chain_sum"
              and (a.key.path[1:] in (["eval", "base"], ["saturated", "sft_set"])
                   or a.key.path[1:3] in (["saturated", "adapter"], ["saturated", "eval"]))]
    return everything, wanted


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """An output folder in which the SFT adapter was trained and evaluated once."""
    out = tmp_path_factory.mktemp("world") / "out"
    store_pool_and_partitions(out)
    overrides = {**OVERRIDES, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, wanted = _report_assets(overrides)
    assert materialize(everything, selection=wanted,
                       resources=resources(out, "demo", overrides)).success
    return out


def _evaluate_again(out: Path, tiny_model_dir: Path) -> tuple[bool, str]:
    """Materialise the SFT cell's eval report alone: (success, the step's error message)."""
    overrides = {**OVERRIDES, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, _ = graph("demo", overrides)
    report = [a for a in by_name(everything, "chain_sum", "sft") if a.key.path[2] == "eval"]
    result = dg.materialize(everything, selection=report,
                            resources=resources(out, "demo", overrides), raise_on_error=False)
    failures = result.get_step_failure_events()
    return result.success, failures[0].step_failure_data.error.message if failures else ""


def _copy(world: Path, tmp_path: Path) -> Path:
    """The world's output folder copied (moved folders keep their adapters readable)."""
    out = tmp_path / "out"
    shutil.copytree(world, out, symlinks=True)
    return out


def test_weights_changed_in_place_are_refused_by_the_eval_report(
        world: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    from safetensors.torch import load_file, save_file

    out = _copy(world, tmp_path)
    assert _evaluate_again(out, tiny_model_dir) == (True, "")  # the copy reads as it is
    weights = adapter_folder(out, "sft") / ADAPTER_WEIGHTS
    tensors = load_file(weights)
    name = next(k for k in sorted(tensors) if "lora_B" in k)
    tensors[name] = tensors[name] + 0.5  # one module's lora_B, changed in place
    save_file(tensors, weights, metadata={"format": "pt"})
    recorded = json.loads((weights.parent / RESULT_FILE).read_text())["weights_version"]
    ok, message = _evaluate_again(out, tiny_model_dir)
    assert not ok
    assert f"{weights}: expected weights hashing to {recorded}" in message
    assert "found " in message and "re-materialise adapter sft" in message


def test_current_naming_another_adapters_key_folder_is_refused_by_the_eval_report(
        world: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = _copy(world, tmp_path)
    sft = adapter_folder(out, "sft")
    # another adapter of the split, trained into its own home (real PEFT weights)
    other_home = sft.parent.parent / "dpo_entropy"
    other = other_home / "fedcba9876543210"
    shutil.copytree(sft, other)
    result = json.loads((other / RESULT_FILE).read_text())
    key = other.name + "0" * 48
    (other / RESULT_FILE).write_text(json.dumps({**result, "adapter_dir": str(other),
                                                 "cache_key": key}))
    record = json.loads((other / TRAINING_RECORD).read_text())
    (other / TRAINING_RECORD).write_text(json.dumps({**record, "cache_key": key,
                                                    "method": "dpo"}))
    # the probe: sft's current names a key folder copied from dpo_entropy
    shutil.copytree(other, sft.parent / other.name)
    (sft.parent / "current").write_text(other.name + "\n")
    ok, message = _evaluate_again(out, tiny_model_dir)
    assert not ok
    assert (f"{sft.parent / other.name / RESULT_FILE}: expected the adapter "
            "chain_sum/saturated/sft (sft)") in message
    assert f"found one trained into {other}" in message
    assert "re-materialise adapter sft" in message


def test_the_runs_table_refuses_an_adapter_whose_current_names_another_adapter(
        tmp_path: Path) -> None:
    """The same fault before another reader, with records written by hand (no training)."""
    from tests.reporting.test_runs_table import OVERRIDES as RUNS
    from tests.reporting.test_runs_table import _seed_inputs

    out = tmp_path / "out"
    _seed_inputs(out)
    other = seed_adapter_folder(out, "dpo_entropy", method="dpo", key="fedcba9876543210")
    home = out / "adapters" / "chain_sum" / "saturated" / "sft"
    home.mkdir(parents=True)
    shutil.copytree(other, home / other.name)
    (home / "current").write_text(other.name + "\n")
    everything, _ = graph("demo", RUNS)
    (table,) = by_name(everything, "chain_sum", "runs_table")
    result = dg.materialize(everything, selection=[table.key],
                            resources=resources(out, "demo", RUNS),
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.message
    assert "expected the adapter chain_sum/saturated/sft (sft)" in message
    assert "dpo_entropy" in message and "re-materialise adapter sft" in message
    assert not (out / "chain_sum" / "runs_table.csv").exists()


def test_check_adapter_names_the_file_what_was_expected_and_what_was_found(
        tmp_path: Path) -> None:
    from saturated_dag.training.folders import AdapterIdentity, AdapterMismatch, check_adapter

    sft = AdapterIdentity("chain_sum", "saturated", "sft", "sft")
    folder = seed_adapter_folder(tmp_path, "sft", method="sft")
    assert check_adapter(folder, sft)["cache_key"] == "0123456789abcdef"
    with pytest.raises(AdapterMismatch, match=r"expected the adapter chain_sum/hard/sft"):
        check_adapter(folder, AdapterIdentity("chain_sum", "hard", "sft", "sft"))
    with pytest.raises(AdapterMismatch, match=r"training_config\.json: expected method 'raft'"):
        check_adapter(folder, AdapterIdentity("chain_sum", "saturated", "sft", "raft"))
    with pytest.raises(AdapterMismatch, match=r"expected the adapter chain_sum/saturated/sft_"
                                              r"seed1 \(sft\)"):  # another seed
        check_adapter(folder, AdapterIdentity("chain_sum", "saturated", "sft_seed1", "sft"))
    (folder / ADAPTER_WEIGHTS).write_bytes(b"other weights")
    with pytest.raises(AdapterMismatch, match=r"adapter_model\.safetensors: expected weights "
                                              r"hashing to [0-9a-f]{16} .* found [0-9a-f]{16}"):
        check_adapter(folder, sft)
    (folder / RESULT_FILE).unlink()
    with pytest.raises(AdapterMismatch, match=r"result\.json is missing"):
        check_adapter(folder, sft)


def test_weights_are_hashed_once_per_process_however_many_readers_check_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reuses the cache hit's memoised hash (``shards.file_fingerprint``)."""
    import hashlib

    from saturated_dag.infra import shards
    from saturated_dag.training.folders import AdapterIdentity, check_adapter

    folder = seed_adapter_folder(tmp_path, "sft", method="sft")
    shards._FINGERPRINTS.clear()
    hashed: list[int] = []
    real = hashlib.sha256
    monkeypatch.setattr(shards.hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    for _ in range(5):
        check_adapter(folder, AdapterIdentity("chain_sum", "saturated", "sft", "sft"))
    assert len(hashed) == 1


def test_a_card_of_another_adapter_is_refused(tmp_path: Path) -> None:
    from saturated_dag.reporting.model_card import (
        AdapterFacts,
        CardOfAnotherAdapter,
        EvalFacts,
        write_eval_card,
        write_training_card,
    )

    facts = AdapterFacts(
        name="dpo_entropy", asset_key="chain_sum/saturated/adapter/dpo_entropy",
        task="chain_sum", split="saturated", method="dpo", scorer="entropy",
        training_data="chain_sum/saturated/dpo_pairs/entropy", training_rows=4,
        base_model="m", base_model_spec="m", hyperparameters={}, seed=0, max_epochs=1,
        best_epoch=1, validation_pass_at_1=None, validation_questions=1,
        validation_curve=[], weights_version="w", versions={})
    write_training_card(tmp_path, facts)
    evaluation = EvalFacts(report="chain_sum/saturated/eval/sft", eval_set="e", questions=1,
                           samples_per_question=2, eval_replicates=1, samples=2,
                           training_replicate=0, metrics={}, weights_version="w")
    with pytest.raises(CardOfAnotherAdapter, match="expected the card of chain_sum/saturated/"
                                                   "sft, found that of chain_sum/saturated/"
                                                   "dpo_entropy"):
        write_eval_card(tmp_path, evaluation, ("chain_sum", "saturated", "sft"))
    assert write_eval_card(tmp_path, evaluation, ("chain_sum", "saturated", "dpo_entropy"))
