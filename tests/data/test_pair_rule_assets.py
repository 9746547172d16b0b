"""Issue 13.2 in the Dagster layer: the profile picks the DPO pair rule, the dataset records
it, and the chosen != rejected check tells equal texts (allowed by the paper's rule, counted,
WARN) from broken pairs (an error)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.preference_datasets import _scored_asset, pairs_verdict, preference_dataset_checks
from saturated_dag.infra.atomic import atomic_write_parquet
from tests.pipeline import resources
from tests.scoring_data import make_pool


def _seed(store: Path) -> None:
    pool = make_pool()
    texts = {0: "3 + 4 = 7 \\boxed{7}", 1: "so \\boxed{7}", 2: "3 + 4 = 7 \\boxed{7}",
             3: "\\boxed{7}"}
    pool = pool.with_columns(completion=pl.when(pl.col("question_id") == "q_sat1")
                             .then(pl.col("sample_index").replace_strict(
                                 texts, default=None, return_dtype=pl.String))
                             .otherwise(pl.col("completion")))
    # q_sat1: argmax 0 and argmin 2 have the same text; q_sat2: plain distinct texts
    values = [1.0, 0.5, 0.0, 0.2, 0.9, 0.1, 0.3, 0.4, *[0.0] * (pool.height - 8)]
    scores = pool.select("question_id", "sample_index", "correct").with_columns(
        split=pl.col("question_id").replace_strict(
            {"q_sat1": "saturated", "q_sat2": "saturated"}, default=None,
            return_dtype=pl.String),
        score=pl.Series(values))
    atomic_write_parquet(pool, store / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(scores, store / "chain_sum" / "entropy_scores.parquet")


@pytest.mark.parametrize("distinct", [False, True])
def test_profile_picks_the_rule_and_the_check_counts_equal_texts(
        tmp_path: Path, distinct: bool) -> None:
    store = tmp_path / "out" / "assets"
    _seed(store)
    asset = _scored_asset("chain_sum", "saturated", "dpo_pairs", "entropy", "entropy_scores")
    overrides = {"training": {"dpo_distinct_texts": distinct}}
    upstream = [dg.SourceAsset(key=["chain_sum", name], io_manager_key="parquet_io")
                for name in ("generation_pool", "entropy_scores")]
    result = dg.materialize([*upstream, asset, *preference_dataset_checks([asset])],
                            resources=resources(tmp_path / "out", "ci", overrides),
                            selection=[asset.key])
    assert result.success
    meta = {k: v.value for k, v in
            result.asset_materializations_for_node(asset.node_def.name)[0].metadata.items()}
    pairs = pl.read_parquet(store / "chain_sum" / "saturated" / "dpo_pairs" / "entropy.parquet")
    first = pairs.filter(pl.col("question_id") == "q_sat1").row(0, named=True)
    (check,) = result.get_asset_check_evaluations()
    assert check.passed and meta["dpo_distinct_texts"] is distinct
    if distinct:
        assert (first["chosen_sample"], first["rejected_sample"]) == (0, 3)
        assert meta["equal_text_pairs"] == 0 and meta["pair_rule"].startswith("dpo_distinct")
        assert check.severity == dg.AssetCheckSeverity.ERROR
    else:
        assert (first["chosen_sample"], first["rejected_sample"]) == (0, 2)
        assert meta["equal_text_pairs"] == 1 and meta["pair_rule"].startswith("paper")
        assert check.severity == dg.AssetCheckSeverity.WARN
        assert check.metadata["equal_text_pairs"].value == 1


def _pairs(chosen: list[str], rejected: list[str], samples: list[tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i}" for i in range(len(chosen))],
                         "chosen": chosen, "rejected": rejected,
                         "chosen_sample": [a for a, _ in samples],
                         "rejected_sample": [b for _, b in samples]})


def test_equal_texts_are_an_error_where_the_rule_forbids_them() -> None:
    table = _pairs(["A", "B"], ["A", "C"], [(0, 1), (0, 2)])
    allowed = pairs_verdict(table, equal_texts_allowed=True)
    assert allowed.passed and allowed.severity == dg.AssetCheckSeverity.WARN
    assert allowed.metadata["equal_text_pairs"].value == 1
    forbidden = pairs_verdict(table, equal_texts_allowed=False)
    assert not forbidden.passed and forbidden.severity == dg.AssetCheckSeverity.ERROR
    assert forbidden.metadata["first_identical"].value == "q0"


def test_the_same_sample_on_both_sides_is_always_an_error() -> None:
    table = _pairs(["A", "B"], ["C", "B"], [(0, 1), (3, 3)])
    for allowed in (True, False):
        verdict = pairs_verdict(table, equal_texts_allowed=allowed)
        assert not verdict.passed and verdict.metadata["same_sample_pairs"].value == 1
    clean = pairs_verdict(_pairs(["A"], ["C"], [(0, 1)]), equal_texts_allowed=False)
    assert clean.passed and clean.metadata["equal_text_pairs"].value == 0
