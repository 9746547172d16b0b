"""Every benchmark at a toy size on the tiny random model, so they keep working.

Timing targets are not asserted (a shared CI machine says nothing about them); what is
asserted is what must hold at any size: both variants do the same work, values agree, ratios
are finite and positive.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import dagster as dg
import pytest

from benchmarks import bench_entropy, bench_judge, bench_sampling, bench_training, decode_step
from benchmarks.common import PeakTensorMemory, peak_memory
from benchmarks.demo_breakdown import adapter_phases, asset_kind, breakdown, markdown


def _finite_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _toy(tiny_model_dir: Path, tmp_path: Path, name: str) -> list[str]:
    return ["--model", str(tiny_model_dir), "--toy", "--threads", "1",
            "--out", str(tmp_path / f"{name}.json")]


def test_peak_tensor_memory_counts_live_tensors_only() -> None:
    import torch

    x = torch.ones(1000)  # existed before: not counted

    def work() -> float:
        a = x * 2  # 4,000 bytes
        b = a + 1  # 8,000 live
        del a
        c = b * 3  # a freed first: 8,000 again
        return float(c.sum())

    peak, result = peak_memory(work)
    assert result == 9000.0
    assert 8000 <= peak < 12000
    with PeakTensorMemory() as tracker:
        y = x.view(10, 100)  # a view allocates nothing
        y.add_(1)  # nor does an in-place op
    assert tracker.peak == 0


def test_sampling_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = bench_sampling.main(_toy(tiny_model_dir, tmp_path, "sampling"))
    summary = out["summary"]
    assert summary["sequences"] == {"plain": 6, "batched": 6, "ours": 6}  # 3 questions x n=2
    assert _finite_positive(summary["tokens_per_s_ratio"])
    assert _finite_positive(summary["over_batched_generate"])
    assert all(row[2] > 0 for row in out["rows"])
    assert json.loads((tmp_path / "sampling.json").read_text())["benchmark"] == "sampling"


def test_entropy_benchmark_values_agree(tiny_model_dir: Path, tmp_path: Path) -> None:
    summary = bench_entropy.main(_toy(tiny_model_dir, tmp_path, "entropy"))["summary"]
    assert summary["max_abs_diff"] <= 1e-4
    assert summary["max_abs_diff_in_generation_vs_plain"] <= 1e-4
    assert 0 < summary["memory_ratio"] < 1
    assert _finite_positive(summary["time_ratio"])


def test_training_benchmark_same_loss_and_gradients(tiny_model_dir: Path,
                                                    tmp_path: Path) -> None:
    summary = bench_training.main(_toy(tiny_model_dir, tmp_path, "training"))["summary"]
    assert summary["loss_only_abs_diff"] <= 1e-5
    assert summary["loss_only_grad_max_diff"] <= 1e-6
    assert summary["step_loss_abs_diff"] <= 1e-4
    assert summary["step_grad_max_diff"] <= 1e-6
    assert 0 < summary["step_memory_ratio"] < 1
    assert _finite_positive(summary["loss_only_speedup"])
    assert _finite_positive(summary["step_speedup"])


def test_judge_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    args = [*_toy(tiny_model_dir, tmp_path, "judge"), "--batched-baseline"]
    out = bench_judge.main(args)
    summary = out["summary"]
    assert summary["comparisons"] == 6  # 2 questions x C(3, 2)
    assert summary["shared_prefix_tokens"] > 0
    assert _finite_positive(summary["per_comparison_speedup"])
    assert _finite_positive(summary["speedup_vs_batched_no_cache"])
    # Greedy decoding: batching may flip a near-tie, but not most comparisons.
    same, total = map(int, summary["identical_outputs"].split("/"))
    assert same >= total - 1


def test_decode_step_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows = decode_step.main(_toy(tiny_model_dir, tmp_path, "decode"))["rows"]
    assert [row[0] for row in rows] == [1, 4]
    assert all(_finite_positive(row[3]) for row in rows)


def test_throughput_floor_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    from benchmarks import throughput_floor

    args = ["--model", str(tiny_model_dir), "--threads", "1", "--slots", "4", "8",
            "--questions", "3", "--repeats", "1", "--out", str(tmp_path / "floor.json")]
    rows = throughput_floor.main(args)["rows"]
    assert [row[0] for row in rows] == [4, 8]
    assert all(_finite_positive(value) for row in rows for value in row[1:])
    # the floor counts every weight of the tiny model's config once per token
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    weights = sum(i * o for i, o in throughput_floor.linear_shapes(config))
    assert throughput_floor.flops_per_token(config, 0) == 2 * weights


def test_asset_kind_names() -> None:
    assert asset_kind(["base_model"]) == "base_model"
    assert asset_kind(["chain_sum", "generation_pool"]) == "generation_pool"
    assert asset_kind(["study", "chain_sum", "saturated", "adapter", "sft"]) == "adapter"
    assert asset_kind(["study", "chain_sum", "self_judge_scores"]) == "self_judge_scores"
    assert asset_kind(["chain_sum", "eval", "base"]) == "eval"
    assert asset_kind(["chain_sum", "saturated", "adapter", "rrhf_x"]) == "adapter"
    assert asset_kind(["chain_sum", "strict_saturated", "sft_set"]) == "sft_set"
    assert asset_kind(["chain_sum", "hard", "dpo_pairs", "random"]) == "dpo_pairs"


def test_demo_breakdown_reads_a_real_run() -> None:
    @dg.asset(key=["chain_sum", "generation_pool"])
    def pool() -> int:
        time.sleep(0.05)
        return 1

    @dg.asset(key=["chain_sum", "saturated", "adapter", "a"], deps=[pool])
    def adapter_a(context) -> int:  # unannotated: the module postpones annotations
        time.sleep(0.02)
        context.log.info("training sft on 4 rows for 1 epochs")  # the trainer's first line
        time.sleep(0.03)
        context.log.info("epoch 1: {'val_pass@1': 0.5}")
        return 2

    @dg.asset(key=["chain_sum", "saturated", "adapter", "b"], deps=[pool])
    def adapter_b() -> int:
        return 3

    @dg.asset_check(asset=pool)
    def pool_ok() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True)

    defs = dg.Definitions(assets=[pool, adapter_a, adapter_b], asset_checks=[pool_ok],
                          jobs=[dg.define_asset_job("demo", selection="*")])
    with dg.DagsterInstance.ephemeral() as instance:
        defs.resolve_job_def("demo").execute_in_process(instance=instance)
        result = breakdown(instance)
        with pytest.raises(LookupError):
            breakdown(instance, job="no_such_job")
        phases = adapter_phases(instance, result["run_id"])
    assert phases["adapters"] == 1  # adapter b logged no training: not counted
    assert phases["startup"] >= 0.02 and phases["training"] >= 0.03 and phases["finish"] >= 0
    kinds = result["per_kind"]
    assert result["job"] == "demo" and result["status"] == "SUCCESS"
    assert kinds["adapter"]["steps"] == 2 and kinds["generation_pool"]["steps"] == 1
    assert kinds["generation_pool"]["seconds"] >= 0.05
    assert result["run_wall_s"] >= result["steps_wall_s"] > 0
    assert "| adapter | 2 |" in markdown(result)


def test_multi_adapter_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    from benchmarks import bench_multi_adapter

    out = bench_multi_adapter.main(_toy(tiny_model_dir, tmp_path, "multi"))
    summary = out["summary"]
    assert summary["adapters"] == 2 and summary["same_samples"] is True
    assert _finite_positive(summary["tokens_per_s_ratio"])
    assert len({row[2] for row in out["rows"]}) == 1  # every variant generated the same tokens


def test_methods_benchmark(tiny_model_dir: Path, tmp_path: Path) -> None:
    from benchmarks import bench_methods

    out = bench_methods.main(_toy(tiny_model_dir, tmp_path, "methods"))
    assert [(row[0], row[1]) for row in out["rows"]] == [
        (m, v) for m in ("dpo", "sft", "rrhf") for v in ("ours", "defaults")]
    assert all(row[3] > 0 for row in out["rows"])
    assert all(_finite_positive(s["ours_over_defaults_tokens_per_s"])
               for s in out["summary"].values())


def test_gpu_sampler_benchmark_dry_run_on_cpu(tmp_path: Path) -> None:
    """The GPU script's checks (test_decoder's, on the chosen device) hold on CPU at toy
    size, and its throughput rows compare the same work."""
    from benchmarks import gpu_sampler

    report = gpu_sampler.main(["--device", "cpu", "--toy", "--out", str(tmp_path / "g.json")])
    assert report["all_checks_pass"], report["checks"]
    assert len(report["checks"]) == 5
    for row in report["throughput"]:
        assert _finite_positive(row["ours_over_batched"])
        assert row["tokens"]["ours"] > 0 and row["tokens"]["batched"] > 0
