"""Which result tables each shipped profile produces (Tables 1-3, 7-9, Figure 6)."""

import dagster as dg
import pytest

from assets import experiment_assets
from saturated_dag.config import load_profile


def _tables(profile: str) -> set[str]:
    return {"/".join(k.path) for a in experiment_assets(load_profile(profile)) for k in a.keys
            if k.path[-1] in ("results_table", "rank_weight_ablation", "rrhf_variants",
                              "dpo_beta_sweep")}


def test_paper_profile_has_every_chain_sum_table_and_gsm8k_without_strict_split() -> None:
    tables = _tables("paper")
    assert {"chain_sum/results_table", "chain_sum/rank_weight_ablation",
            "chain_sum/rrhf_variants", "chain_sum/dpo_beta_sweep",
            "gsm8k/results_table"} <= tables
    keys = {k for a in experiment_assets(load_profile("paper")) for k in a.keys}
    assert dg.AssetKey(["gsm8k", "hard", "adapter", "dpo_correctness_self_judge"]) in keys
    assert not [k for k in keys if k.path[:2] == ["gsm8k", "strict_saturated"]]


@pytest.mark.parametrize("profile", ["paper_instruct"])
def test_instruct_profile_is_table_3(profile: str) -> None:
    loaded = load_profile(profile)
    assert loaded.policy.model == "Qwen/Qwen3-1.7B" and loaded.tasks == ["gsm8k"]
    keys = {"/".join(k.path) for a in experiment_assets(loaded) for k in a.keys
            if k.path[0] == "gsm8k" and "adapter" in k.path}
    assert keys == {f"gsm8k/saturated/adapter/dpo_{s}"
                    for s in ("self_judge", "strong_judge", "entropy", "random")} | {
        "gsm8k/hard/adapter/dpo_correctness_random",
        "gsm8k/hard/adapter/dpo_correctness_self_judge"}
