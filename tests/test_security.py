"""Security basics: remote code stays off unless configured; a hub token in the environment
never reaches logs, metadata or outputs."""

from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.profiles import load_profile
from tests.pipeline import graph, resources

SENTINEL = "hf_sentinelTOKEN0123456789abcdef"


@pytest.mark.parametrize("profile", ["demo", "ci", "paper", "paper_instruct"])
def test_remote_code_is_off_in_every_shipped_profile(profile: str) -> None:
    loaded = load_profile(profile)
    assert loaded.policy.trust_remote_code is False
    assert loaded.judges.strong.trust_remote_code is False


def test_hub_token_never_reaches_logs_metadata_or_outputs(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    overrides = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]},
                               "questions_per_cell": 2, "strict_grid": None},
                 "sampling": {"n": 2, "max_new_tokens": 4},
                 "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    keys = [dg.AssetKey(["chain_sum", "generation_pool"]),
            dg.AssetKey(["chain_sum", "difficulty_partitions"])]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(graph("demo", overrides)[0], selection=keys, instance=instance,
                            resources=resources(tmp_path / "out", "demo", overrides))
    assert result.success
    logged = [str(e) for e in instance.all_logs(result.run_id)]
    assert logged and not [line for line in logged if SENTINEL in line]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path
