"""An adapter's cache hit needs its weights and their recorded hash: a folder that lost or
changed its weights is trained again (it used to be a permanent cache hit whose check failed
with an unrelated error, and "re-materialise it" was the same cache hit again)."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline import ONE_SFT_ADAPTER, adapter_folder, by_name, graph, materialize, resources
from tests.scoring_data import store_pool_and_partitions


def test_a_missing_or_changed_weights_file_is_trained_again(tmp_path: Path,
                                                             tiny_model_dir: Path) -> None:
    out = tmp_path / "out"
    store_pool_and_partitions(out)
    overrides = {**ONE_SFT_ADAPTER, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, _ = graph("demo", overrides)
    wanted = [*by_name(everything, "chain_sum", "sft_set"),
              *by_name(everything, "chain_sum", "sft")]
    wanted = [a for a in wanted if a.key.path[1] == "saturated"
              and a.key.path[2] in ("adapter", "sft_set")]
    live = resources(out, "demo", overrides)

    def materialise() -> str:
        result = materialize(everything, selection=wanted, resources=live)
        [event] = [e for e in result.get_asset_materialization_events()
                   if e.asset_key.path[-1] == "sft" and e.asset_key.path[2] == "adapter"]
        return event.materialization.metadata["cache"].value

    assert materialise() == "miss"
    weights = adapter_folder(out, "sft") / "adapter_model.safetensors"  # its key's folder
    assert weights.is_file()
    assert materialise() == "hit"
    weights.unlink()
    assert materialise() == "miss" and weights.is_file()  # trained again, not a hit
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one changed byte in the tensors
    weights.write_bytes(bytes(data))
    assert materialise() == "miss"
    assert materialise() == "hit"


def test_a_retrained_adapter_gets_a_new_key_folder_and_an_earlier_layout_is_retired(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """Settings that change the cache key train into a new key folder, which ``current``
    then names; the old key's folder goes. An adapter left by the earlier layout (its name a
    symlink to ``.<name>@<time>``) is removed, not trained into."""
    import copy

    out = tmp_path / "out"
    store_pool_and_partitions(out)
    base = {**ONE_SFT_ADAPTER, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    home = out / "adapters" / "chain_sum" / "saturated" / "sft"
    old = home.parent / ".sft@1700000000000000000"
    old.mkdir(parents=True)
    (old / "adapter_config.json").write_text("{}")
    home.symlink_to(old.name)

    def materialise(learning_rate: float) -> dict:
        overrides = copy.deepcopy(base)
        overrides["training"]["learning_rate"] = learning_rate
        everything, _ = graph("demo", overrides)
        wanted = [a for a in [*by_name(everything, "chain_sum", "sft_set"),
                              *by_name(everything, "chain_sum", "sft")]
                  if a.key.path[1] == "saturated" and a.key.path[2] in ("adapter", "sft_set")]
        result = materialize(everything, selection=wanted,
                             resources=resources(out, "demo", overrides))
        [event] = [e for e in result.get_asset_materialization_events()
                   if e.asset_key.path[-1] == "sft" and e.asset_key.path[2] == "adapter"]
        return event.materialization.metadata

    first = materialise(1e-2)
    assert not home.is_symlink() and not old.exists()  # the earlier layout retired
    folder = adapter_folder(out, "sft")
    assert first["cache"].value == "miss" and folder == (
        out / first["folder"].value / first["adapter folder"].value / first["key folder"].value)
    assert folder.name == first["cache_key"].value[:16]
    second = materialise(2e-2)
    moved = adapter_folder(out, "sft")
    assert second["cache"].value == "miss" and moved != folder and not folder.exists()
    assert sorted(p.name for p in home.iterdir()) == sorted([moved.name, "current"])
    assert materialise(2e-2)["cache"].value == "hit"
