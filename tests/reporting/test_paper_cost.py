"""The cost table of docs/paper-run.md (saturated_dag/reporting/paper_cost.py): counts that match
what the pipeline builds, a tiny profile checked by hand, and GPU-hours linear in throughput."""

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.experiments import experiment_matrix, trained_adapters
from saturated_dag.profiles import load_profile, parse_profile
from saturated_dag.reporting import paper_cost as pc
from saturated_dag.scorers.tournament import schedule_pairs
from tests.conftest import REPO_ROOT

TINY = {
    "name": "tiny",
    "tasks": ["chain_sum"],
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 10,
                  "strict_grid": None, "eval_questions_per_cell": 3},
    "policy": {"backend": "vllm", "model": "tiny/model", "device": "cuda"},
    "sampling": {"n": 4},
    "scoring": {"correct_splits": ["saturated"], "all_completion_splits": ["hard"]},
    "judges": {"strong": {"kind": "rubric"}},
    "training": {"splits": ["saturated", "hard"], "methods": ["dpo", "sft"],
                 "scorers": ["self_judge"], "epochs": 2, "batch_size": 4,
                 "per_device_batch_size": 4, "validation_questions_per_cell": 5},
}
SAME = pc.Lengths(prompt=10, completion=20)
TINY_DATA = pc.TaskAssumptions(saturated=3, strict_saturated=0, hard=2, hard_correct=2,
                               lengths=dict.fromkeys(pc.POPULATIONS, SAME), self_judge_output=5,
                               strong_judge_output=7, judge_overhead=1)
TINY_ASSUMPTIONS = pc.Assumptions(chain_sum=TINY_DATA, gsm8k=TINY_DATA)
ROUND = pc.Throughput(policy_decode=100, policy_prefill=1000, hf_generate=10,
                      teacher_forced=50, training_flops=1, strong_decode=((1, 1.0),),
                      strong_prefill=1, policy_matmul_params=1)


def _rows(profile=None, assumptions=TINY_ASSUMPTIONS, throughput=ROUND):
    rows = pc.stage_costs(profile or parse_profile(TINY), assumptions, throughput)
    return {r.stage: r for r in rows}


def test_tiny_profile_counts_match_the_hand_computation() -> None:
    rows = _rows()
    # 1 cell x 10 questions x n=4; the prompt read once per question
    pool = rows["pool sampling: D"]
    assert (pool.sequences, pool.prompt_tokens, pool.generated_tokens) == (40, 100, 800)
    # C(4, 2) = 6 comparisons per question: 3 saturated + 2 hard questions
    judge = rows["self-judge comparisons"]
    assert judge.judge_comparisons == judge.sequences == 30
    assert judge.prompt_tokens == 30 * (10 + 2 * 20 + 1) and judge.generated_tokens == 30 * 5
    rubric = rows["strong-judge comparisons (rubric, CPU)"]
    assert rubric.judge_comparisons == 30 and rubric.gpu_hours == 0
    # vLLM gives no entropies: every scored completion is teacher-forced (prompt + completion)
    entropy = rows["teacher-forced entropy"]
    assert (entropy.sequences, entropy.prompt_tokens) == (20, 20 * 30)
    # cells: saturated dpo_self_judge, sft; hard dpo_correctness_{random,self_judge}, sft
    dpo, sft = rows["training: DPO"], rows["training: SFT"]
    assert (dpo.adapters, sft.adapters) == (3, 2)
    assert dpo.sequences == 2 * (2 * 3 + 2 * 2 + 2 * 2)  # 2 epochs x pairs x 2 sequences
    assert sft.sequences == 2 * (3 * 4 + 2)  # 2 epochs x (n per saturated question + hard correct)
    assert dpo.training_tokens == dpo.sequences * 30 and sft.training_tokens == sft.sequences * 30
    # 5 adapters x 2 epochs x 5 validation questions x n
    validation = rows["validation sampling (each epoch)"]
    assert (validation.sequences, validation.prompt_tokens, validation.generated_tokens) == (
        200, 500, 4000)
    assert rows["adapter load checks"].generated_tokens == 5 * 32
    # the base model and 5 cells x 1 training seed, 3 eval questions, n=4
    evals = rows["eval reports: base + 5 cells"]
    assert (evals.sequences, evals.prompt_tokens, evals.generated_tokens) == (72, 180, 1440)


def test_tiny_profile_gpu_hours_match_the_hand_computation() -> None:
    rows = _rows()
    assert rows["pool sampling: D"].gpu_hours == pytest.approx((800 / 100 + 100 / 1000) / 3600)
    assert rows["teacher-forced entropy"].gpu_hours == pytest.approx(600 / 50 / 3600)
    # no gradient checkpointing: 4N per token, DPO's reference pass 2N more (N = 1 here)
    assert rows["training: DPO"].gpu_hours == pytest.approx(28 * 30 * 6 / 3600)
    assert rows["training: SFT"].gpu_hours == pytest.approx(28 * 30 * 4 / 3600)
    assert rows["validation sampling (each epoch)"].gpu_hours == pytest.approx(
        (4000 / 10 + 500 / 1000) / 3600)


def test_both_orders_doubles_the_comparisons_as_the_tournament_schedules_them() -> None:
    both = parse_profile({**TINY, "scoring": {**TINY["scoring"], "both_orders": True}})
    judge = _rows(both)["self-judge comparisons"]
    assert judge.judge_comparisons == 5 * len(schedule_pairs(4, both_orders=True)) == 60


def test_gpu_hours_are_linear_in_throughput() -> None:
    profile = load_profile("paper")
    rate = pc.default_throughput()
    base = pc.stage_costs(profile, throughput=rate)
    doubled = pc.stage_costs(profile, throughput=rate.scaled(2.0))
    for before, after in zip(base, doubled, strict=True):
        assert after.gpu_hours == pytest.approx(before.gpu_hours / 2), before.stage
        assert after.sequences == before.sequences  # the work does not depend on the rate
    assert pc.total(doubled).gpu_hours == pytest.approx(pc.total(base).gpu_hours / 2)


def test_paper_adapter_count_is_what_the_experiment_matrix_trains() -> None:
    profile = load_profile("paper")
    training, n = profile.training, profile.sampling.n
    rows = pc.stage_costs(profile)
    chain_sum = sum(r.adapters for r in rows if r.task == "chain_sum")
    assert chain_sum == len(trained_adapters(training, experiment_matrix(training), n)) == 2232
    gsm8k = sum(r.adapters for r in rows if r.task == "gsm8k")
    assert gsm8k == len(pc.task_adapters(profile, "gsm8k"))
    # GSM8K has no D': no strict-saturated adapter, cell or eval report
    assert not [a for a in pc.task_adapters(profile, "gsm8k") if a.split == "strict_saturated"]
    evals = next(r for r in rows if r.task == "chain_sum" and r.stage.startswith("eval"))
    # Figure 6's λ = 0 row evaluates its three training seeds (App. C.2)
    assert evals.sequences == (1 + len(experiment_matrix(training)) + 2) * 200 * n


def test_adapter_counts_equal_the_adapter_partitions_dagster_builds() -> None:
    """The same adapters as the graph: one adapter asset per cell, one Dagster partition per
    adapter of its configurations; an adapter two cells share (a sweep row equal to a
    configuration of a main cell) is counted once."""
    from assets import profile_assets
    from saturated_dag.experiments import experiment_plan

    profile = load_profile("paper")
    assets, _ = profile_assets(profile)
    for task, plan in experiment_plan(profile).items():
        cells = {(a.key.path[1], a.key.path[3]): a for a in assets
                 if isinstance(a, dg.AssetsDefinition)
                 and a.key.path[0] == task and a.key.path[2:3] == ["adapter"]}
        assert sorted(cells) == sorted((c.split, c.name) for c in plan.cells)
        trained = set()
        for cell in plan.cells:
            keys = cells[cell.split, cell.name].partitions_def.get_partition_keys()
            assert list(keys) == list(plan.partitions[cell])
            trained |= {plan.partitions[cell][k] for k in keys}
        assert len(trained) == len(pc.task_adapters(profile, task))


def test_split_sizes_larger_than_their_pool_are_refused() -> None:
    too_many = replace(TINY_DATA, saturated=9, hard=2)
    with pytest.raises(ValueError, match="exceed the pool"):
        _rows(assumptions=pc.Assumptions(chain_sum=too_many, gsm8k=TINY_DATA))
    with pytest.raises(ValueError, match="hard_correct"):
        _rows(assumptions=pc.Assumptions(chain_sum=replace(TINY_DATA, hard_correct=5),
                                         gsm8k=TINY_DATA))


def test_chain_sum_split_sizes_follow_table_6() -> None:
    """Binomial by default; a spread of rates within a cell (rho) saturates more questions and
    leaves fewer hard ones with a correct answer."""
    plain = pc.chain_sum_assumptions()
    assert sum(pc.correct_of_n(k, 0.56, 8) for k in range(9)) == pytest.approx(1)
    assert sum(pc.correct_of_n(k, 0.56, 8, rho=0.3) for k in range(9)) == pytest.approx(1)
    assert plain.saturated == round(sum(3000 * (pc.table6_pass_rate(t, d)) ** 8
                                        for t in range(6, 11) for d in range(6, 11)))
    assert plain.saturated + plain.hard <= 25 * 3000 and plain.strict_saturated <= 15 * 3000
    spread = pc.chain_sum_assumptions(rho=0.4)
    assert spread.saturated > plain.saturated and spread.hard < plain.hard
    assert math.isclose(pc.chain_sum_completion_tokens(4, 3), 117)  # App. A.4's example


def test_script_prints_the_table_for_both_paper_profiles(capsys) -> None:
    path = REPO_ROOT / "scripts" / "paper_cost.py"
    spec = importlib.util.spec_from_file_location("paper_cost_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for profile in ("paper", "paper_instruct"):
        module.main(["--profile", profile])
        out = capsys.readouterr().out
        assert "| all | **total** |" in out and "ESTIMATE" in out
        assert f"Profile `{profile}`" in out


FIXTURE = Path(__file__).resolve().parent / "gpu_check_fixture.json"
"""A GPU check's JSON with synthetic round rates (not a measurement): the shapes are the
committed paper shapes; gsm8k SFT with checkpointing failed, so it has no rate."""


def _script():
    path = REPO_ROOT / "scripts" / "paper_cost.py"
    spec = importlib.util.spec_from_file_location("paper_cost_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measured_rates_replace_the_estimates_they_stand_for() -> None:
    import json

    report = json.loads(FIXTURE.read_text())
    profile = load_profile("paper")
    estimate = pc.default_throughput()
    rate, measured = pc.measured_throughput(report, profile, estimate)
    label = "MEASURED on FIXTURE-GPU, 2000-01-01"
    assert measured["training chain_sum dpo"] == label
    assert "training gsm8k sft" not in measured  # its run failed: the estimate stays
    n = estimate.policy_matmul_params
    assert rate.training_rate("chain_sum", "dpo") == pytest.approx(8000 * 8 * n)  # 6N + 2N
    assert rate.training_rate("gsm8k", "rrhf") == pytest.approx(9000 * 6 * n)
    assert rate.training_rate("gsm8k", "sft") == estimate.training_flops
    est, got = ({r.stage + r.task: r for r in pc.stage_costs(profile, throughput=t)}
                for t in (estimate, rate))
    # a training row's hours are its tokens over the measured tokens/s
    dpo = got["training: DPOchain_sum"]
    assert dpo.gpu_hours == pytest.approx(dpo.training_tokens / 8000 / 3600)
    assert got["training: SFTgsm8k"].gpu_hours == est["training: SFTgsm8k"].gpu_hours
    val = got["validation sampling (each epoch)gsm8k"]
    assert val.gpu_hours == pytest.approx(
        (val.generated_tokens / 2000 + val.prompt_tokens / estimate.policy_prefill) / 3600)
    entropy = got["teacher-forced entropychain_sum"]
    assert entropy.gpu_hours == pytest.approx(entropy.prompt_tokens / 50000 / 3600)
    # vLLM's rates are not part of the check: sampling, judging and evals are unchanged
    for stage in ("pool sampling: Dchain_sum", "strong-judge comparisonsgsm8k",
                  "eval reports: base + 9 cellsgsm8k"):
        assert got[stage].gpu_hours == est[stage].gpu_hours
    assert rate.scaled(2.0).training_rate("chain_sum", "dpo") == pytest.approx(
        2 * rate.training_rate("chain_sum", "dpo"))


def test_script_recomputes_the_table_from_a_rates_json(capsys) -> None:
    module = _script()
    module.main(["--profile", "paper"])
    estimated = capsys.readouterr().out
    module.main(["--profile", "paper", "--rates", str(FIXTURE)])
    out = capsys.readouterr().out
    assert "MEASURED on FIXTURE-GPU (2000-01-01)" in out.splitlines()[0]
    lines = {line.split(" | ")[0].lstrip("| "): line for line in out.splitlines()
             if line.startswith("| ")}
    for rate in ("policy decoding (vLLM, Qwen3-1.7B)", "policy prefill (vLLM)",
                 "strong judge decoding (vLLM, Qwen3-30B-A3B)", "strong judge prefill"):
        assert "ESTIMATE (vLLM is not part of the GPU check)" in lines[rate]
    assert "MEASURED on FIXTURE-GPU, 2000-01-01" in lines["LoRA training, chain_sum, DPO"]
    assert "8,000 tokens/s" in lines["LoRA training, chain_sum, DPO"]
    assert "ESTIMATE (not in the GPU check's JSON)" in lines["LoRA training, gsm8k, SFT"]
    assert "MEASURED" in lines["validation sampling (transformers, slot decoder), gsm8k"]
    assert "MEASURED" in lines["teacher-forced entropy (transformers), chain_sum"]

    def total(text: str) -> str:
        return next(line for line in text.splitlines() if line.startswith("| all |"))

    assert total(out) != total(estimated) and "| GPU-hours |" in out
    assert "Sensitivity of the total" in out


def test_rates_from_a_toy_or_foreign_json_are_refused() -> None:
    import json

    report = json.loads(FIXTURE.read_text())
    profile = load_profile("paper")
    toy = {**report, "shapes": {**report["shapes"], "model": {**report["shapes"]["model"],
                                                               "hidden": 32}}}
    with pytest.raises(ValueError, match=r"other shapes than Qwen3-1\.7B"):
        pc.measured_throughput(toy, profile)
    with pytest.raises(ValueError, match="not a GPU check"):
        pc.measured_throughput({**report, "kind": "something else"}, profile)
