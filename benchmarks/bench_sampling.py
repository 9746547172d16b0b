"""Sampling throughput: our transformers backend against one ``generate`` call per question.

The plain version is what a researcher writes first (and what the paper's public code does):
for each question, ``model.generate(num_return_sequences=n, do_sample=True, ...)``. Ours
expands all questions x n samples, sorts them by prompt length and generates them in large
batches, tracking entropy in the same pass. Both get the same prompt token ids, temperature,
top-p, token limit and seeds; generated tokens are counted up to and including the EOS.

    python -m benchmarks.bench_sampling --model arith-base
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
    load_backend,
    median,
)
from saturated_dag.generation.base import SamplingParams


def _until_eos(row: list[int], eos: list[int]) -> list[int]:
    for i, token in enumerate(row):
        if token in eos:
            return row[: i + 1]
    return row


@torch.no_grad()
def plain_sampling(backend: Any, prompts: list[str], params: SamplingParams) -> list[list[int]]:
    """One ``generate`` per question (n samples via num_return_sequences); token lists."""
    model, eos = backend.model, backend.eos_ids
    config = backend._generation_config(params)
    config.num_return_sequences = params.n
    completions = []
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([backend.encode_prompt(prompt)])
        torch.manual_seed(params.seed * 1_000_003 + i)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             generation_config=config)
        completions += [_until_eos(row, eos) for row in out[:, ids.shape[1]:].tolist()]
    return completions


def ours_sampling(backend: Any, prompts: list[str], params: SamplingParams) -> list[list[int]]:
    out = backend.sample(prompts, params)
    return [s.token_ids for group in out for s in group]


def vllm_rows(model: str, questions: int, params: SamplingParams, threads: int
              ) -> list[list[Any]]:
    """The vLLM backend on the same prompts (run from the environment where vLLM imports)."""
    import os
    import time

    from saturated_dag.generation.vllm_backend import VllmBackend

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if threads == 1 else "0-1")
    backend = VllmBackend.load(model, dtype="float32", seed=params.seed)
    try:
        prompts, _ = chain_sum_prompts(backend, questions)
        backend.sample(prompts, params)  # warm-up
        start = time.perf_counter()
        out = backend.sample(prompts, params)
        seconds = time.perf_counter() - start
        tokens = sum(s.num_tokens for g in out for s in g)
        return [["vLLM-cpu backend", seconds, tokens, tokens / seconds]]
    finally:
        backend.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64, help="our backend's batch")
    parser.add_argument("--vllm", action="store_true",
                        help="only the vLLM backend (run from the .venv-vllm environment)")
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
        rows = vllm_rows(args.model, args.questions, params, args.threads)
        Report("sampling (vLLM)", args.model, settings, columns, rows).emit(args.out)
        return {"rows": rows}

    backend = load_backend(args.model, args.threads, args.batch_size)
    prompts, _ = chain_sum_prompts(backend, args.questions)
    seconds, results = alternate({
        "plain": lambda: plain_sampling(backend, prompts, params),
        "ours": lambda: ours_sampling(backend, prompts, params),
    }, args.repeats, warmup=not args.toy)
    rows, rate = [], {}
    labels = {"plain": "plain: generate per question", "ours": "ours: batched backend"}
    for name in ("plain", "ours"):
        tokens = sum(len(t) for t in results[name])
        rate[name] = tokens / median(seconds[name])
        rows.append([labels[name], median(seconds[name]), tokens, rate[name]])
    summary = {"tokens_per_s_ratio": rate["ours"] / rate["plain"], "target": ">= 3",
               "seconds": seconds,
               "sequences": {k: len(v) for k, v in results.items()}}
    report = Report("sampling", args.model, settings, columns, rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
