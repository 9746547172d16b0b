"""Eval reports sampled in shared batched passes (``evaluation.adapters_per_pass``) equal the
reports sampled one model at a time, shard for shard."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
from polars.testing import assert_frame_equal

from saturated_dag.evaluation.reports import ReportShards, evaluate_samples, sample_shards_together
from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.infra.shards import ShardStore
from saturated_dag.tasks.chain_sum import build_pool
from tests.evaluation.test_eval_replicates import SMALL
from tests.generation.test_multi_lora import _adapter
from tests.pipeline import asset_path, by_name, graph, resources

PARAMS = SamplingParams(n=3, temperature=1.0, top_p=0.95, max_new_tokens=8, seed=4)


def test_batched_shards_equal_each_model_sampled_alone(tiny_model_dir: Path,
                                                       tmp_path: Path) -> None:
    questions = build_pool("eval", [(2, 1), (3, 1)], 4, 0)  # 8 questions, shards of 3
    adapters = [_adapter(tiny_model_dir, tmp_path / "a", 1),
                _adapter(tiny_model_dir, tmp_path / "b", 2)]
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=16)
    parts = [(None, 0), (adapters[0], 0), (adapters[0], 1), (adapters[1], 0)]

    def params(replicate: int) -> SamplingParams:
        return SamplingParams(**{**PARAMS.__dict__, "seed": PARAMS.seed + replicate})

    reports = [ReportShards(ShardStore(tmp_path / "together" / str(k)), params(r), a)
            for k, (a, r) in enumerate(parts)]
    sampled = sample_shards_together(questions, reports, backend, shard_size=3, per_pass=3)
    assert sorted(sampled.values()) == [3] * len(parts)  # 3 shards each, none stored before
    again = sample_shards_together(questions, reports, backend, shard_size=3)
    assert sum(again.values()) == 0  # all stored

    for k, (adapter, replicate) in enumerate(parts):
        store = ShardStore(tmp_path / "together" / str(k))
        together = evaluate_samples(questions, lambda: (_ for _ in ()).throw(
            AssertionError("every shard was stored: no model should load")),
            params(replicate), store=store, shard_size=3)
        assert store.last_stats is not None and store.last_stats.cache == "hit"
        assert together.height == len(questions) * PARAMS.n
        # the same model sampled alone, through the shard path the reports used before
        exact = evaluate_samples(questions, backend if adapter is None else _Single(
            backend, adapter), params(replicate), shard_size=3)
        assert_frame_equal(together, exact)
    first, second = (pl.read_parquet(ShardStore(tmp_path / "together" / str(k)).shard_path(0))
                     for k in (1, 3))
    assert first["completion"].to_list() != second["completion"].to_list()  # can fail


class _Single:
    """One adapter alone through ``sample_many`` (a one-request batch)."""

    name = "transformers"

    def __init__(self, backend: TransformersBackend, adapter: Path):
        self.backend, self.adapter, self.tokenizer = backend, adapter, backend.tokenizer

    def render(self, text: str) -> str:
        return self.backend.render(text)

    def sample(self, prompts, params, progress=None):
        from saturated_dag.generation.base import SampleRequest

        return self.backend.sample_many([SampleRequest(prompts, params, self.adapter)])[0]

    def close(self) -> None:
        pass


def _base_report(out: Path, tiny: Path, per_pass: int) -> tuple[pl.DataFrame, dict]:
    overrides = {**SMALL, "policy": {"model": str(tiny), "batch_size": 8},
                 "evaluation": {"replicates": 3, "adapters_per_pass": per_pass}}
    assets, _ = graph("demo", overrides)
    base = by_name(assets, "chain_sum", "base")
    result = dg.materialize(assets, selection=[a.key for a in base],
                            resources=resources(out, "demo", overrides))
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return (pl.read_parquet(asset_path(out, "chain_sum", "eval", "base")),
            event.materialization.metadata)


def test_the_asset_batches_its_replicates_and_reports_the_same(tmp_path: Path,
                                                                tiny_model_dir: Path) -> None:
    batched, meta = _base_report(tmp_path / "batched", tiny_model_dir, 8)
    alone, meta_alone = _base_report(tmp_path / "alone", tiny_model_dir, 1)
    assert meta["shards sampled in batched passes"].value > 0
    assert meta_alone["shards sampled in batched passes"].value == 0
    assert meta["cache"].value == meta_alone["cache"].value == "miss"  # what the run did
    assert sorted(batched["replicate"].unique().to_list()) == [0, 1, 2]
    assert_frame_equal(batched, alone)
