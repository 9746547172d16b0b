"""Evaluating many LoRA adapters: one batched pass against one adapter at a time.

One at a time is what the eval reports did before: per adapter, the base model loaded again
with the adapter merged in (``adapter_backend``) and the eval set sampled in batches of
``--batch-size``. Batched is ``TransformersBackend.sample_many``: the base model loaded once,
every adapter attached unmerged, each row routed to its adapter, ``--batch-size`` rows per
adapter in one decoding batch. A third variant, one at a time with the batched pass's width,
separates the gain of a wider batch from that of sharing it between adapters. All get the
same prompts, sampling settings and per-row seeds (the batched samples equal the
one-at-a-time ones: ``tests/generation/test_multi_lora.py``); tokens are counted up to and
including EOS.

    python -m benchmarks.bench_multi_adapter --model arith-base --adapters 8
    python -m benchmarks.bench_multi_adapter --model smollm2-135m-instruct --adapters 8 \
        --questions 4 --max-new-tokens 64 --repeats 1

Adapters are LoRA r=32, alpha=64 on q/k/v/o (the project's training settings) with random
weights small enough to keep the model's behaviour (``--adapters-dir`` uses trained ones).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import Report, alternate, base_parser, chain_sum_prompts, median
from saturated_dag.generation.base import SampleRequest, SamplingParams


def random_adapters(model_spec: str, count: int, folder: Path, scale: float) -> list[Path]:
    """``count`` LoRA folders with random A and B of standard deviation ``scale``."""
    from peft import LoraConfig, get_peft_model

    from saturated_dag.generation.models import load_model

    out = []
    for k in range(count):
        torch.manual_seed(1000 + k)
        model, _ = load_model(model_spec)
        peft = get_peft_model(model, LoraConfig(
            r=32, lora_alpha=64, init_lora_weights=False,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        with torch.no_grad():
            for name, param in peft.named_parameters():
                if "lora_" in name:
                    param.normal_(0.0, scale)
        peft.save_pretrained(folder / f"adapter{k}")
        out.append(folder / f"adapter{k}")
    return out


def one_at_a_time(spec: str, adapters: list[Path], prompts: list[str], params: SamplingParams,
                  batch_size: int) -> list[list[int]]:
    from saturated_dag.evaluation.reports import adapter_backend

    tokens = []
    for folder in adapters:
        backend = adapter_backend(spec, str(folder), batch_size=batch_size)
        tokens += [s.token_ids for group in backend.sample(prompts, params) for s in group]
        backend.close()
    return tokens


def batched(backend: Any, adapters: list[Path], prompts: list[str], params: SamplingParams,
            batch_size: int) -> list[list[int]]:
    requests = [SampleRequest(prompts, params, folder) for folder in adapters]
    out = backend.sample_many(requests, batch_size=batch_size * len(adapters))
    return [s.token_ids for request in out for group in request for s in group]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from saturated_dag.generation.transformers_backend import TransformersBackend

    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--adapters", type=int, default=8)
    parser.add_argument("--adapters-dir", type=Path, default=None,
                        help="use the trained adapters under this split folder "
                        "(outputs/adapters/<task>/<split>)")
    parser.add_argument("--questions", type=int, default=96)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--batch-size", type=int, default=64, help="rows per adapter")
    parser.add_argument("--scale", type=float, default=0.02,
                        help="standard deviation of the random LoRA weights")
    parser.add_argument("--no-wide", action="store_true",
                        help="skip one-at-a-time at the batched pass's width")
    parser.add_argument("--profile", action="store_true",
                        help="also run the batched pass once under torch.profiler and print "
                        "its operators by self CPU time")
    args = parser.parse_args(argv)
    if args.toy:
        args.adapters, args.questions, args.n, args.max_new_tokens = 2, 3, 2, 8
        args.repeats = 1
    torch.set_num_threads(args.threads)
    params = SamplingParams(n=args.n, temperature=0.6, top_p=0.95,
                            max_new_tokens=args.max_new_tokens, seed=0)
    with tempfile.TemporaryDirectory() as scratch:
        if args.adapters_dir is not None:
            # <name>/<cache key>/: an adapter's key folders (saturated_dag.training.folders)
            adapters = sorted(p.parent for p in args.adapters_dir.glob("*/*/adapter_config.json"))
            adapters = adapters[: args.adapters]
        else:
            adapters = random_adapters(args.model, args.adapters, Path(scratch), args.scale)
        backend = TransformersBackend.load(args.model, batch_size=args.batch_size)
        prompts, _ = chain_sum_prompts(backend, args.questions)
        wide = args.batch_size * len(adapters)
        variants = {
            "alone": lambda: one_at_a_time(args.model, adapters, prompts, params,
                                           args.batch_size),
            "batched": lambda: batched(backend, adapters, prompts, params, args.batch_size),
        }
        if not args.no_wide:
            variants["alone_wide"] = lambda: one_at_a_time(args.model, adapters, prompts,
                                                           params, wide)
        seconds, results = alternate(variants, args.repeats, warmup=not args.toy)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                batched(backend, adapters, prompts, params, args.batch_size)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    labels = {"alone": f"one at a time, merged, batch {args.batch_size}",
              "alone_wide": f"one at a time, merged, batch {wide}",
              "batched": f"batched: {len(adapters)} adapters, batch {wide}"}
    rows, rate = [], {}
    for name in variants:
        tokens = sum(len(t) for t in results[name])
        rate[name] = tokens / median(seconds[name])
        rows.append([labels[name], median(seconds[name]), tokens, rate[name]])
    summary: dict[str, Any] = {
        "tokens_per_s_ratio": rate["batched"] / rate["alone"], "target": ">= 4 with >= 8",
        "same_samples": results["batched"] == results["alone"],
        "seconds": seconds, "adapters": len(adapters)}
    if "alone_wide" in rate:
        summary["tokens_per_s_ratio_vs_wide"] = rate["batched"] / rate["alone_wide"]
    settings = {"adapters": len(adapters), "questions": args.questions, "n": args.n,
                "max_new_tokens": args.max_new_tokens, "temperature": 0.6, "top_p": 0.95,
                "batch_size_per_adapter": args.batch_size, "repeats": args.repeats,
                "adapter_weights": str(args.adapters_dir) if args.adapters_dir
                else f"random, std {args.scale}"}
    report = Report("multi-adapter evaluation", args.model, settings,
                    ["variant", "median s", "generated tokens", "tokens/s"], rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
