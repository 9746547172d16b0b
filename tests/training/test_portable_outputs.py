"""Issue 33: outputs that travel. An adapter folder names its base model portably (hub id, or a
path relative to the project) and loads from a copy elsewhere; an eval report's Parquet file
says what it evaluated; the adapter's model card says what it is and how it did; a cell's
report names and links the configuration it evaluated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import torch

from saturated_dag.generation import models
from saturated_dag.generation.models import portable_model_name, resolve
from tests.conftest import REPO_ROOT as REPO
from tests.pipeline import (
    ONE_SFT_ADAPTER,
    adapter_folder,
    asset_path,
    by_name,
    graph,
    materialize,
    resources,
    seed_adapter_folder,
)
from tests.scoring_data import store_pool_and_partitions


def test_the_embedded_model_is_named_by_its_path_in_the_project_and_found_from_anywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = portable_model_name("arith-base")
    assert name == "saturated_dag/models/arith_base"
    monkeypatch.chdir(tmp_path)  # not the project: the relative path must not need the cwd
    source = resolve(name)
    assert (source.kind, Path(source.location)) == ("folder", REPO / name)
    assert portable_model_name("Qwen/Qwen3-1.7B-Base") == "Qwen/Qwen3-1.7B-Base"


def test_a_model_outside_the_project_keeps_its_name_or_its_path(
        tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing portable names a folder outside the project; a packaged short name (a model
    built into the cache) stays the short name, which finds it on any machine."""
    assert portable_model_name(str(tiny_model_dir)) == str(tiny_model_dir.resolve())
    monkeypatch.setitem(models.KNOWN_MODELS, "tiny-packaged", lambda: tiny_model_dir)
    assert portable_model_name("tiny-packaged") == "tiny-packaged"


def _train(base: str, out: Path) -> Path:
    from saturated_dag.config import TrainingSettings
    from saturated_dag.training.train import train_adapter

    prompt = "<|user|>Compute the following step by step:\n1 + 2 =<|end|><|assistant|>"
    data = pl.DataFrame({"question_id": ["q0", "q1"], "sample_index": [0, 0],
                         "prompt": [prompt, prompt], "completion": ["1 + 2 = 3 \\boxed{3}"] * 2})
    settings = TrainingSettings(epochs=1, batch_size=2, per_device_batch_size=2,
                                learning_rate=5e-2, max_length=96, lora_r=4, lora_alpha=8,
                                lora_dropout=0.0)
    return Path(train_adapter("sft", base, data, settings, out).adapter_dir)


def test_an_adapter_copied_to_another_machine_loads_its_base_from_the_project(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The base model sits inside the project (as the embedded model does); the adapter
    folder, copied elsewhere, loads with nothing but itself from any working folder."""
    from peft import AutoPeftModelForCausalLM, PeftModel

    from saturated_dag.evaluation.reports import adapter_backend, recorded_base_model
    from saturated_dag.generation.models import load_model

    project = tmp_path / "project"
    monkeypatch.setattr(models, "PROJECT_ROOT", project)
    base = shutil.copytree(tiny_model_dir, project / "models" / "tiny")
    adapter = _train(str(base), tmp_path / "outputs" / "adapter")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "models/tiny"  # not the training machine's path
    record = json.loads((adapter / "training_config.json").read_text())
    assert record["base_model_name_or_path"] == "models/tiny"
    assert "peft" in record["versions"]

    copied = shutil.copytree(adapter, tmp_path / "elsewhere" / "adapter")  # a real folder
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert recorded_base_model(copied) == "models/tiny"
    tokens = torch.tensor([[1, 5, 9, 12]])
    model, _ = load_model(str(base))
    expected = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()(tokens).logits
    backend = adapter_backend(None, str(copied))  # the base model from the copy alone
    with torch.no_grad():
        got = backend.model(tokens).logits
    assert torch.allclose(got, expected.detach(), atol=1e-5)
    backend.close()
    # hub tooling, run from the project root, reads the same name
    monkeypatch.chdir(project)
    auto = AutoPeftModelForCausalLM.from_pretrained(str(copied))
    with torch.no_grad():
        assert torch.allclose(auto.merge_and_unload()(tokens).logits, expected.detach(),
                              atol=1e-5)




def test_reports_and_cards_say_what_they_are(tmp_path: Path, tiny_model_dir: Path) -> None:
    """One SFT adapter trained and evaluated through the graph: its eval report names it on
    every row, its card gets the eval part (idempotently: an unchanged re-run leaves the
    file alone; a cache hit of the adapter keeps it), its report's metadata links it."""
    from huggingface_hub import ModelCard

    out = tmp_path / "out"
    store_pool_and_partitions(out)
    overrides = {**ONE_SFT_ADAPTER, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, _ = graph("demo", overrides)
    wanted = [a for a in [*by_name(everything, "chain_sum", "sft_set", "sft", "base")]
              if a.key.path[1] in ("saturated", "eval")]
    live = resources(out, "demo", overrides)

    def materialise(*names: str) -> dict[str, dg.AssetMaterialization]:
        keys = [a.key for a in wanted  # "eval": both reports (the base model's is an input)
                if {a.key.path[-1], a.key.path[-2], a.key.path[-3]} & set(names)]
        result = materialize(everything, selection=keys, resources=live)
        assert result.success
        return {"/".join(e.asset_key.path): e.materialization
                for e in result.get_asset_materialization_events()}

    events = materialise("sft_set", "adapter", "eval")
    report = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "eval", "sft"))
    base = pl.read_parquet(asset_path(out, "chain_sum", "eval", "base"))
    identity = ["adapter", "method", "scorer", "split", "base_model"]
    assert report.columns[:5] == identity  # first: a file read alone says what it is
    assert report.select(identity).unique().rows() == [
        ("sft", "sft", None, "saturated", str(tiny_model_dir))]
    assert base.select(identity).unique().rows() == [(None, None, None, None,
                                                      str(tiny_model_dir))]

    folder = adapter_folder(out, "sft")
    card = ModelCard.load(folder / "README.md")
    assert card.data.base_model == str(tiny_model_dir.resolve())  # outside the project
    assert card.data.library_name == "peft"
    stored = card.data.to_dict()["saturated_dag"]
    assert stored["adapter"]["training_data"] == "chain_sum/saturated/sft_set"
    assert stored["evaluation"]["report"] == "chain_sum/saturated/eval/sft"
    assert stored["evaluation"]["samples"] == report.height
    assert {r.metric_type for r in card.data.eval_results} == {"pass@1", "pass@2"}
    assert "| pass@1 |" in card.text and "Not evaluated yet" not in card.text

    metadata = events["chain_sum/saturated/eval/sft"].metadata
    assert metadata["configuration"].value == "sft"
    assert metadata["adapter"].value == "seed0"  # its partition of the cell's adapter asset
    assert metadata["adapters (asset)"].value == dg.AssetKey(
        ["chain_sum", "saturated", "adapter", "sft"])
    assert metadata["base eval report"].value == dg.AssetKey(["chain_sum", "eval", "base"])
    assert metadata["hyperparameters"].value["LoRA r"] == 4
    assert metadata["model card"].value == "eval results written to README.md (seed0)"
    adapter = events["chain_sum/saturated/adapter/sft"].metadata  # the card's path: its page
    assert adapter["model card"].value == "README.md in the key folder"
    assert folder == (Path(out) / adapter["folder"].value / adapter["adapter folder"].value
                      / adapter["key folder"].value)
    assert "selection" not in metadata  # one configuration: nothing was selected
    assert events["chain_sum/eval/base"].metadata["evaluated"].value == "the base model"

    readme = folder / "README.md"
    before, stamp = readme.read_bytes(), readme.stat().st_mtime_ns
    materialise("eval")  # cache hits: the same report, the same card, the file untouched
    assert readme.read_bytes() == before and readme.stat().st_mtime_ns == stamp
    events = materialise("adapter")  # a cache hit rewrites nothing and keeps the eval part
    assert events["chain_sum/saturated/adapter/sft"].metadata["cache"].value == "hit"
    assert readme.read_bytes() == before


def test_a_selected_configuration_is_named_with_its_settings_and_links(tmp_path: Path) -> None:
    """A cell with several configurations: its report names the configuration the selection chose
    by its key and each training seed's adapter by its partition key (the names the adapter's
    and the selection's pages give them), its recorded hyperparameters, and links the
    selection."""
    from assets.eval_reports import configuration_metadata
    from saturated_dag.experiments import (
        Experiment,
        adapter_partition_key,
        configuration_key,
        replicates,
    )
    from saturated_dag.profiles import load_profile
    from saturated_dag.training.config import settings_record

    training = load_profile("demo", {}).training
    cell = Experiment("saturated", "dpo", "self_judge", ("dpo_pairs", "self_judge"))
    chosen = cell.with_settings(training, {"dpo_beta": 0.5})
    seeds = replicates(training, chosen, 2)
    settings = settings_record("dpo", chosen.training(training))
    seed_adapter_folder(tmp_path, seeds[0].name, record={"settings": settings})
    key = configuration_key(training, cell, chosen)
    partitions = [adapter_partition_key(training, cell, s) for s in seeds]
    assert partitions == [f"{key}_seed{i}" for i in range(2)], (key, partitions)
    got = configuration_metadata("chain_sum", cell, key, seeds, partitions, str(tmp_path),
                                 selected=True, base_model="arith-base",
                                 profile=load_profile("demo"))
    assert got["configuration"] == key
    assert got["hyperparameters"].value["β (DPO)"] == 0.5
    assert got["selection"].value == dg.AssetKey(
        ["chain_sum", "saturated", "selection", cell.name])
    for index, partition in enumerate(partitions):
        label = f"adapter (training replicate {index})"
        assert got[label] == partition
        assert got["adapters (asset)"].value == dg.AssetKey(
            ["chain_sum", "saturated", "adapter", cell.name])
        # the folders are on the adapter's page, not here (each is wider than the panel)
        assert f"adapter_dir (training replicate {index})" not in got
