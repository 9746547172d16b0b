"""An adapter's cache hit needs its weights and their recorded hash: a folder that lost or
changed its weights is trained again (it used to be a permanent cache hit whose check failed
with an unrelated error, and "re-materialise it" was the same cache hit again)."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline import ONE_SFT_ADAPTER, by_name, graph, materialize, resources
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

    weights = out / "adapters" / "chain_sum" / "saturated" / "sft" / "adapter_model.safetensors"
    assert materialise() == "miss" and weights.is_file()
    assert materialise() == "hit"
    weights.unlink()
    assert materialise() == "miss" and weights.is_file()  # trained again, not a hit
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one changed byte in the tensors
    weights.write_bytes(bytes(data))
    assert materialise() == "miss"
    assert materialise() == "hit"
