"""Print, as Markdown, each stage's work for a profile and its estimated GPU-hours on one H100.

    .venv/bin/python scripts/paper_cost.py --profile paper
    .venv/bin/python scripts/paper_cost.py --profile paper_instruct

docs/paper-run.md embeds this output. The counts come from the profile and the experiment
matrix; split sizes and lengths are the assumptions of ``saturated_dag.paper_cost`` (printed
below the table); the GPU-hours are an ESTIMATE from published throughput figures (printed with
their sources), not a measurement.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from saturated_dag import paper_cost as pc
from saturated_dag.config import load_profile
from saturated_dag.experiments import experiment_plan
from saturated_dag.training.config import LoraSettings
from saturated_dag.training.memory import QWEN3_1_7B

STARTUP_MINUTES = 1.0
"""Per training process, for the note on what the table leaves out: a child process starts,
imports torch/TRL/PEFT and loads the 1.7B base model, once for a cell's whole grid (one step,
``assets/adapters.py``). A round number, not measured."""
TOKENIZER_BYTES = 16e6
"""Per adapter folder: the tokenizer files ``train_adapter`` saves beside the weights (Qwen3's
tokenizer.json, vocab.json and merges.txt: about 16 MB). An assumption, not measured here."""


def _judge_rates(profile, assumptions: pc.Assumptions, rate: pc.Throughput) -> str:
    """Sequences in flight and output tokens/s of the strong judge, per task and split."""
    if profile.judges.strong.kind != "llm":
        return "the rubric (CPU)"
    parts = []
    for task in profile.tasks:
        data = assumptions.task(task)
        for split in pc.scored_splits(profile, task):
            flight = pc.strong_in_flight(profile, data, split, rate)
            parts.append(f"{task} {split}: {flight} in flight, "
                         f"{rate.strong_rate(flight):,.0f} tokens/s")
    return "; ".join(parts)


def _rates(profile, assumptions: pc.Assumptions, rate: pc.Throughput
           ) -> list[tuple[str, str, str]]:
    policy = pc.matmul_parameters(pc.QWEN3_1_7B)
    ratio = pc.matmul_parameters(pc.QWEN3_8B) / policy
    peak = pc.H100_BF16_DENSE_FLOPS
    return [
        ("policy decoding (vLLM, Qwen3-1.7B)", f"{rate.policy_decode:,.0f} tokens/s",
         f"ML.ENERGY Qwen3-8B {pc.ML_ENERGY_QWEN3_8B[1]:,.0f} tokens/s x {ratio:.2f} "
         f"(matmul parameters per token {pc.matmul_parameters(pc.QWEN3_8B) / 1e9:.2f}B / "
         f"{policy / 1e9:.2f}B)"),
        ("policy prefill (vLLM)", f"{rate.policy_prefill:,.0f} tokens/s",
         f"{pc.LLAMA3_MFU:.0%} MFU (Llama 3's, assumed for batched prefill) x "
         f"{peak / 1e12:.0f} TFLOPS / (2 x {policy / 1e9:.2f}B)"),
        ("strong judge decoding (vLLM, Qwen3-30B-A3B)", "per split (right)",
         "ML.ENERGY Qwen3-30B-A3B, linear between its points, at the judge sequences the KV "
         f"cache holds: {_judge_rates(profile, assumptions, rate)}"),
        ("strong judge prefill", f"{rate.strong_prefill:,.0f} tokens/s",
         f"{pc.LLAMA3_MFU:.0%} MFU (as above) x {peak / 1e12:.0f} TFLOPS / (2 x "
         f"{pc.QWEN3_30B_A3B_ACTIVE / 1e9:.1f}B active)"),
        ("teacher-forced entropy (transformers)", f"{rate.teacher_forced:,.0f} tokens/s",
         f"{pc.TEACHER_FORCED_MFU:.0%} MFU (assumption) x {peak / 1e12:.0f} TFLOPS / "
         f"(2 x {policy / 1e9:.2f}B)"),
        ("validation sampling (transformers generate)", f"{rate.hf_generate:,.0f} tokens/s",
         f"policy decoding / {pc.VLLM_OVER_HF} (vLLM blog)"),
        ("LoRA training (TRL / own σ-RRHF trainer)", f"{rate.training_flops / 1e12:,.0f} TFLOP/s",
         f"{pc.TRAINING_MFU:.0%} MFU (assumption) x {peak / 1e12:.0f} TFLOPS; 6N FLOPs per "
         "token with gradient checkpointing, +2N for DPO's reference pass"),
    ]


def _sensitivity(profile_name: str, base_total: float) -> list[tuple[str, float]]:
    profile = load_profile(profile_name)
    rate = pc.default_throughput()
    peak = pc.H100_BF16_DENSE_FLOPS
    cases: list[tuple[str, float]] = [("as in the table", base_total)]
    if "chain_sum" in profile.tasks:
        for rho in (0.2, 0.4):
            sizes = pc.paper_assumptions(rho)
            cases.append((f"chain-sum split sizes with rho = {rho} ({sizes.chain_sum.saturated:,}"
                          f" / {sizes.chain_sum.strict_saturated:,} / {sizes.chain_sum.hard:,} "
                          "saturated / strict / hard)",
                          pc.total(pc.stage_costs(profile, sizes)).gpu_hours))
    unscaled = replace(rate, policy_decode=pc.ML_ENERGY_QWEN3_8B[1],
                       hf_generate=pc.ML_ENERGY_QWEN3_8B[1] / pc.VLLM_OVER_HF)
    cases.append(("policy decoding at Qwen3-8B's measured rate (no scaling)",
                  pc.total(pc.stage_costs(profile, throughput=unscaled)).gpu_hours))
    for mfu in (0.10, pc.LLAMA3_MFU):
        faster = replace(rate, training_flops=mfu * peak)
        cases.append((f"training at {mfu:.0%} MFU",
                      pc.total(pc.stage_costs(profile, throughput=faster)).gpu_hours))
    return cases


KINDS = (("training", ("training:",)), ("validation sampling", ("validation",)),
         ("judging", ("self-judge", "strong-judge")), ("teacher-forced entropy", ("teacher",)),
         ("sampling and eval", ("pool", "eval", "adapter load")))


def _shares(rows: list[pc.StageCost]) -> str:
    """Where the GPU-hours go, by kind of work."""
    whole = pc.total(rows).gpu_hours or 1.0
    parts = []
    for name, prefixes in KINDS:
        hours = sum(r.gpu_hours for r in rows if r.stage.startswith(prefixes))
        parts.append(f"{name} {hours:,.1f} ({hours / whole:.0%})")
    return "GPU-hours by kind of work: " + ", ".join(parts) + "."


def report(profile_name: str, rho: float = 0.0) -> str:
    profile = load_profile(profile_name)
    assumptions = pc.paper_assumptions(rho)
    rate = pc.default_throughput()
    rows = pc.stage_costs(profile, assumptions, rate)
    out = [f"Profile `{profile_name}` ({profile.policy.model}, n = {profile.sampling.n}; "
           f"GPU-hours: ESTIMATE for one H100 80GB)", "", pc.markdown_table(rows), "",
           _shares(rows), ""]

    out += ["Assumed split sizes (questions) and lengths (mean tokens):", "",
            "| task | saturated | strict_saturated | hard with a correct answer | their correct "
            "completions | basis |", "|---|---:|---:|---:|---:|---|"]
    for task in profile.tasks:
        a = assumptions.task(task)
        out.append(f"| {task} | {a.saturated:,} | {a.strict_saturated:,} | {a.hard:,} | "
                   f"{a.hard_correct:,} | {a.basis} |")
    out += ["", "| task | population | prompt | completion |", "|---|---|---:|---:|"]
    for task in profile.tasks:
        a = assumptions.task(task)
        for population in pc.POPULATIONS:
            if task == "gsm8k" and population in ("strict_pool", "strict_saturated"):
                continue
            length = a.length(population)
            out.append(f"| {task} | {population} | {length.prompt:.0f} | "
                       f"{length.completion:.0f} |")
        out.append(f"| {task} | judge output (self / strong) | | {a.self_judge_output:.0f} / "
                   f"{a.strong_judge_output:.0f} |")

    out += ["", "Throughput (ESTIMATES, one H100 80GB):", "", "| rate | value | derived from |",
            "|---|---:|---|"]
    out += [f"| {name} | {value} | {how} |"
            for name, value, how in _rates(profile, assumptions, rate)]
    out += ["", *(f"- {line}" for line in rate.assumptions)]
    out += ["", "Published figures used:", "",
            "| figure | value | conditions | source | used for |", "|---|---|---|---|---|"]
    out += [f"| {f.figure} | {f.value} | {f.conditions} | {f.url} | {f.used} |"
            for f in pc.SOURCES]

    base = pc.total(rows).gpu_hours
    out += ["", "Sensitivity of the total (GPU-hours):", "", "| change | total |", "|---|---:|"]
    digits = 0 if base >= 100 else 1
    out += [f"| {name} | {hours:,.{digits}f} |"
            for name, hours in _sensitivity(profile_name, base)]

    adapters = sum(r.adapters for r in rows)
    lora = QWEN3_1_7B.lora_parameters(profile.training.lora_r,
                                      tuple(LoraSettings().target_modules))
    folder = lora * 4 + TOKENIZER_BYTES  # float32 adapter weights (PEFT upcasts them)
    cells = sum(len(plan.cells) for plan in experiment_plan(profile).values())
    out += ["", f"Not in the table: each of the {cells:,} cells trains its grid in one training "
            f"process with one load of the base model (the {adapters:,} adapters share "
            f"{cells:,} loads); at {STARTUP_MINUTES:.0f} minute each that adds "
            f"{cells * STARTUP_MINUTES / 60:,.1f} GPU-hours (one process per adapter: "
            f"{adapters * STARTUP_MINUTES / 60:,.1f}). Disk: each adapter folder holds "
            f"{lora / 1e6:.2f}M float32 LoRA parameters ({lora * 4 / 1e6:.0f} MB) and the "
            f"tokenizer files (about {TOKENIZER_BYTES / 1e6:.0f} MB): "
            f"{adapters * folder / 1e9:,.0f} GB for all adapters."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper", help="paper (default) or paper_instruct")
    parser.add_argument("--rho", type=float, default=0.0,
                        help="spread of pass rates within a chain-sum cell (0: binomial)")
    args = parser.parse_args(argv)
    print(report(args.profile, args.rho))


if __name__ == "__main__":
    main()
