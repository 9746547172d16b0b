"""Print, as Markdown, each stage's work for a profile and its estimated GPU-hours on one H100.

    .venv/bin/python scripts/paper_cost.py --profile paper
    .venv/bin/python scripts/paper_cost.py --profile paper_instruct
    .venv/bin/python scripts/paper_cost.py --profile paper --rates gpu_check.json

docs/paper-run.md embeds this output. The counts come from the profile and the experiment
matrix; split sizes and lengths are the assumptions of ``saturated_dag.reporting.paper_cost``
(printed below the table); the GPU-hours are an ESTIMATE from published throughput figures
(printed with their sources), not a measurement. ``--rates`` takes the JSON of the GPU check
(``scripts/gpu_check.sh``, ``benchmarks/gpu_check.py``): each rate it measured (training per
task and method, validation sampling, the teacher-forced entropy pass) replaces its estimate
and is marked MEASURED with the device and date; vLLM's rates and the strong judge's are not
part of that check and stay marked ESTIMATE.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from saturated_dag.experiments import experiment_plan
from saturated_dag.methods import label as method_label
from saturated_dag.profiles import load_profile
from saturated_dag.reporting import paper_cost as pc
from saturated_dag.training.config import LORA_TARGET_MODULES
from saturated_dag.training.memory import QWEN3_1_7B

STARTUP_MINUTES = 1.0
"""Per training process, for the note on what the table leaves out: a child process starts,
imports torch/TRL/PEFT and loads the 1.7B base model, once for all a cell's adapters (one step,
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


def _sensitivity(profile_name: str, base_total: float, rate: pc.Throughput | None = None
                 ) -> list[tuple[str, float]]:
    """The total under other split sizes, vLLM decoding rate and training MFU, each changed
    alone from ``rate`` (the estimate, or the estimate with measured rates in place)."""
    profile = load_profile(profile_name)
    rate = rate or pc.default_throughput()
    peak = pc.H100_BF16_DENSE_FLOPS
    cases: list[tuple[str, float]] = [("as in the table", base_total)]
    if "chain_sum" in profile.tasks:
        for rho in (0.2, 0.4):
            sizes = pc.paper_assumptions(rho)
            cases.append((f"chain-sum split sizes with rho = {rho} ({sizes.chain_sum.saturated:,}"
                          f" / {sizes.chain_sum.strict_saturated:,} / {sizes.chain_sum.hard:,} "
                          "saturated / strict / hard)",
                          pc.total(pc.stage_costs(profile, sizes, rate)).gpu_hours))
    unscaled = replace(rate, policy_decode=pc.ML_ENERGY_QWEN3_8B[1],
                       hf_generate=pc.ML_ENERGY_QWEN3_8B[1] / pc.VLLM_OVER_HF)
    cases.append(("policy decoding at Qwen3-8B's measured rate (no scaling)",
                  pc.total(pc.stage_costs(profile, throughput=unscaled)).gpu_hours))
    for mfu in (0.10, pc.LLAMA3_MFU):
        faster = replace(rate, training_flops=mfu * peak, training_by=())
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


VLLM_NOT_CHECKED = "ESTIMATE (vLLM is not part of the GPU check)"


def _measured_rates(profile, report: dict[str, Any], rate: pc.Throughput,
                    measured: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(rate, value, status, derived from) for every rate of the cost table, the GPU check's
    measurements in place of the estimates they replace."""
    estimates = {name: (value, how) for name, value, how in
                 _rates(profile, pc.paper_assumptions(), pc.default_throughput())}
    out: list[tuple[str, str, str, str]] = []
    for name in ("policy decoding (vLLM, Qwen3-1.7B)", "policy prefill (vLLM)",
                 "strong judge decoding (vLLM, Qwen3-30B-A3B)", "strong judge prefill"):
        value, how = estimates[name]
        out.append((name, value, VLLM_NOT_CHECKED, how))
    by_task = {(r["task"], r.get("path")): r for r in report.get("sampling", [])
               if not r.get("error")}
    for task in profile.tasks:
        key = f"validation sampling {task}"
        if key in measured:
            row = by_task[task, "decoder"]
            other = by_task.get((task, "generate"))
            out.append((f"validation sampling (transformers, slot decoder), {task}",
                        f"{row['tokens_per_s']:,.0f} tokens/s", measured[key],
                        f"GPU check: {row['prompts']} prompts x n = {row['n']} over "
                        f"{row['slots']} slots, {row['prompt_tokens']}-token prompts, "
                        f"{row['max_new_tokens']} new tokens, median of "
                        f"{len(row['seconds'])}" + (
                            f"; batched generate on the same rows: "
                            f"{other['tokens_per_s']:,.0f} tokens/s" if other else "")))
        else:
            value, how = estimates["validation sampling (transformers generate)"]
            out.append((f"validation sampling (transformers), {task}", value,
                        "ESTIMATE (not in the GPU check's JSON)", how))
    entropy = {r["task"]: r for r in report.get("entropy", []) if not r.get("error")}
    for task in profile.tasks:
        key = f"teacher-forced entropy {task}"
        if key in measured:
            row = entropy[task]
            out.append((f"teacher-forced entropy (transformers), {task}",
                        f"{row['tokens_per_s']:,.0f} tokens/s", measured[key],
                        f"GPU check: {row['sequences']} calls of one completion, "
                        f"{row['prompt_tokens']} + {row['completion_tokens']} tokens, median "
                        f"of {len(row['seconds'])}"))
        else:
            value, how = estimates["teacher-forced entropy (transformers)"]
            out.append((f"teacher-forced entropy (transformers), {task}", value,
                        "ESTIMATE (not in the GPU check's JSON)", how))
    checkpointing = profile.training.gradient_checkpointing
    training = {(r["task"], r["method"], r["checkpointing"]): r
                for r in report.get("training", []) if not r.get("error")}
    for task in profile.tasks:
        methods = sorted({m for t, m, _ in rate.training_by if t == task}
                         | {a.method for a in pc.task_adapters(profile, task)})
        for method in methods:
            label = f"LoRA training, {task}, {method_label(method)}"
            key = f"training {task} {method}"
            if key not in measured:
                value, how = estimates["LoRA training (TRL / own σ-RRHF trainer)"]
                out.append((label, value, "ESTIMATE (not in the GPU check's JSON)", how))
                continue
            row = training[task, method, checkpointing]
            other = training.get((task, method, not checkpointing))
            mfu = f", {row['mfu']:.1%} MFU" if row.get("mfu") is not None else ""
            out.append((label, f"{row['tokens_per_s']:,.0f} tokens/s{mfu}", measured[key],
                        f"GPU check: median of {len(row['step_seconds'])} optimizer steps of "
                        f"{row['sequences_per_step']} x {row['tokens_per_sequence']} tokens, "
                        f"checkpointing {'on' if checkpointing else 'off'} (as the profile), "
                        f"peak {_gib(row.get('peak_memory_bytes'))}" + (
                            f"; checkpointing {'off' if checkpointing else 'on'}: "
                            f"{other['tokens_per_s']:,.0f} tokens/s, peak "
                            f"{_gib(other.get('peak_memory_bytes'))}" if other else "")))
    loads = report.get("loads", {})
    label = measured and next(iter(measured.values()))
    base = loads.get("base_model") or {}
    adapter = loads.get("adapter") or {}
    if base.get("median_s") is not None:
        out.append(("base model load (not in the hours)", f"{base['median_s']:.1f} s", label,
                    "GPU check: load_model from the page cache, median of "
                    f"{len(base['seconds'])}"))
    if adapter.get("save"):
        out.append(("adapter save / load (not in the hours)",
                    f"{adapter['save']['median_s']:.2f} s / {adapter['load']['median_s']:.2f} s",
                    label, "GPU check: save_pretrained; merged_adapter (read, merge, restore)"))
    return out


def _gib(value: float | None) -> str:
    return "not recorded" if value is None else f"{value / 2**30:.1f} GiB"


def read_rates(path: str | Path) -> dict[str, Any]:
    """The GPU check's JSON at ``path``."""
    return json.loads(Path(path).read_text())


def report(profile_name: str, rho: float = 0.0, rates: dict[str, Any] | None = None) -> str:
    """The cost table and what it rests on, as Markdown; ``rates``: a GPU check's JSON whose
    measurements replace the estimates they stand for."""
    profile = load_profile(profile_name)
    assumptions = pc.paper_assumptions(rho)
    rate = pc.default_throughput()
    measured: dict[str, str] = {}
    if rates is not None:
        rate, measured = pc.measured_throughput(rates, profile, rate)
    rows = pc.stage_costs(profile, assumptions, rate)
    if rates is None:
        title = "GPU-hours: ESTIMATE for one H100 80GB"
        hours = "GPU-hours (estimate)"
    else:
        device = rates.get("device", {}).get("name", "unknown device")
        title = (f"GPU-hours from rates MEASURED on {device} ({str(rates.get('date'))[:10]}) "
                 "where marked below, ESTIMATES for one H100 80GB elsewhere")
        hours = "GPU-hours"
    out = [f"Profile `{profile_name}` ({profile.policy.model}, n = {profile.sampling.n}; "
           f"{title})", "", pc.markdown_table(rows, hours), "", _shares(rows), ""]

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

    if rates is None:
        out += ["", "Throughput (ESTIMATES, one H100 80GB):", "",
                "| rate | value | derived from |", "|---|---:|---|"]
        out += [f"| {name} | {value} | {how} |"
                for name, value, how in _rates(profile, assumptions, rate)]
    else:
        out += ["", "Throughput (MEASURED by the GPU check where it says so, ESTIMATES for one "
                "H100 80GB elsewhere):", "", "| rate | value | status | derived from |",
                "|---|---:|---|---|"]
        out += [f"| {name} | {value} | {status} | {how} |"
                for name, value, status, how in _measured_rates(profile, rates, rate, measured)]
    if rates is not None:
        out += ["", "Behind the rates marked ESTIMATE:"]
    out += ["", *(f"- {line}" for line in rate.assumptions)]
    out += ["", "Published figures used:", "",
            "| figure | value | conditions | source | used for |", "|---|---|---|---|---|"]
    out += [f"| {f.figure} | {f.value} | {f.conditions} | {f.url} | {f.used} |"
            for f in pc.SOURCES]

    base = pc.total(rows).gpu_hours
    out += ["", "Sensitivity of the total (GPU-hours):", "", "| change | total |", "|---|---:|"]
    digits = 0 if base >= 100 else 1
    out += [f"| {name} | {hours:,.{digits}f} |"
            for name, hours in _sensitivity(profile_name, base, rate)]

    adapters = sum(r.adapters for r in rows)
    lora = QWEN3_1_7B.lora_parameters(profile.training.lora_r, LORA_TARGET_MODULES)
    folder = lora * 4 + TOKENIZER_BYTES  # float32 adapter weights (PEFT upcasts them)
    cells = sum(len(plan.cells) for plan in experiment_plan(profile).values())
    out += ["", f"Not in the table: each of the {cells:,} cells trains its adapters in one "
            f"training process with one load of the base model (the {adapters:,} adapters share "
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
    parser.add_argument("--rates", type=Path,
                        help="a GPU check's JSON (scripts/gpu_check.sh): its measured rates "
                             "replace the estimates, marked MEASURED")
    args = parser.parse_args(argv)
    print(report(args.profile, args.rho, read_rates(args.rates) if args.rates else None))


if __name__ == "__main__":
    main()
