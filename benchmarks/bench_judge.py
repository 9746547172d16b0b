"""Judge tournaments: the shared prompt prefix's KV cache reused, against re-encoding per pair.

Every judge prompt of a task starts with the same instructions (and, for a base model, the
same few-shot examples): only the problem and the two solutions differ. Plain: for each pair,
the full prompt through a fresh greedy ``generate`` (the same stop rule: a complete
``Judgment: [N]`` or EOS, the same token limit). Ours: ``greedy_shared_prefix`` (what
``LlmJudge`` calls), its prefix cache dropped before every timed call so the prefix's one
encoding is included. Optionally (``--batched-baseline``) also the same batches without the
prefix cache, which separates the cache's gain from batching's.

    python -m benchmarks.bench_judge --model arith-base
    python -m benchmarks.bench_judge --model smollm2-135m-instruct --questions 2 --samples 3 \\
        --max-new-tokens 32 --repeats 2
"""

from __future__ import annotations

from itertools import combinations
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
from saturated_dag.generation.transformers_backend import _TextStop
from saturated_dag.scorers.judges import JudgeRequest, LlmJudge, judgment_stop

_stop = judgment_stop(1)
"""The judge's own stop rule for a pairwise comparison: a complete, valid ``Judgment: [N]``."""



@torch.no_grad()
def plain_judging(backend: Any, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """One fresh ``generate`` per pair on the full prompt."""
    config = backend._generation_config(SamplingParams(n=1, temperature=0,
                                                       max_new_tokens=max_new_tokens))
    outputs = []
    for prompt in prompts:
        ids = torch.tensor([backend.encode_prompt(prompt)])
        out = backend.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config,
            stopping_criteria=[_TextStop(backend.tokenizer, ids.shape[1], _stop)])
        outputs.append(until_eos(out[0, ids.shape[1]:].tolist(), backend.eos_ids))
    return outputs


@torch.no_grad()
def batched_no_cache(backend: Any, prompts: list[str], max_new_tokens: int,
                     batch_size: int) -> list[list[int]]:
    """Left-padded batches of full prompts (no prefix reuse)."""
    config = backend._generation_config(SamplingParams(n=1, temperature=0,
                                                       max_new_tokens=max_new_tokens))
    pad = backend.tokenizer.pad_token_id
    outputs = []
    for start in range(0, len(prompts), batch_size):
        ids, mask = left_padded(
            [backend.encode_prompt(p) for p in prompts[start : start + batch_size]], pad)
        width = ids.shape[1]
        out = backend.model.generate(
            input_ids=ids, attention_mask=mask, generation_config=config,
            stopping_criteria=[_TextStop(backend.tokenizer, width, _stop)])
        outputs += [until_eos(row, backend.eos_ids) for row in out[:, width:].tolist()]
    return outputs


def ours_judging(backend: Any, prompts: list[str], max_new_tokens: int,
                 batch_size: int) -> list[list[int]]:
    backend._prefix_kv = None  # include the prefix's encoding in every timed call
    out = backend.greedy_shared_prefix(prompts, max_new_tokens, stop=_stop,
                                       batch_size=batch_size)
    return [tokens for tokens, _ in out]


def judge_prompts(backend: Any, questions: int, samples: int, instruct: bool) -> list[str]:
    """Every pair of ``samples`` sampled completions of ``questions`` chain-sum questions."""
    texts, qs = chain_sum_prompts(backend, questions)
    out = backend.sample(texts, SamplingParams(n=samples, max_new_tokens=96, seed=0))
    judge = LlmJudge(backend, instruct=instruct)
    prompts = []
    for question, group in zip(qs, out, strict=True):
        for a, b in combinations(range(samples), 2):
            request = JudgeRequest("chain_sum", question.problem, (group[a].text, group[b].text))
            prompts.append(judge.prompt(request))
    return prompts


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4, help="completions per question")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16, help="the demo's judge batch")
    parser.add_argument("--prompt", choices=["few-shot", "instruct"], default="few-shot")
    parser.add_argument("--batched-baseline", action="store_true")
    args = parser.parse_args(argv)
    if args.toy:
        args.questions, args.samples, args.max_new_tokens, args.repeats = 2, 3, 6, 1
        args.batch_size = 4
    backend = load_backend(args.model, args.threads)
    prompts = judge_prompts(backend, args.questions, args.samples, args.prompt == "instruct")
    lengths = [len(backend.encode_prompt(p)) for p in prompts]
    variants = {
        "plain": lambda: plain_judging(backend, prompts, args.max_new_tokens),
        "ours": lambda: ours_judging(backend, prompts, args.max_new_tokens, args.batch_size),
    }
    if args.batched_baseline:
        variants["batched"] = lambda: batched_no_cache(backend, prompts, args.max_new_tokens,
                                                       args.batch_size)
    seconds, results = alternate(variants, args.repeats, warmup=False)
    labels = {"plain": "plain: full prompt, generate per pair",
              "batched": "batched full prompts, no prefix reuse",
              "ours": "ours: shared prefix cached, batched"}
    rows = []
    for name in variants:
        same = sum(a == b for a, b in zip(results[name], results["plain"], strict=True))
        rows.append([labels[name], median(seconds[name]),
                     median(seconds[name]) / len(prompts) * 1e3,
                     sum(len(t) for t in results[name]), f"{same}/{len(prompts)}"])
    prefix = len(backend._shared_prefix([backend.encode_prompt(p) for p in prompts]))
    summary = {"per_comparison_speedup": median(seconds["plain"]) / median(seconds["ours"]),
               "target": ">= 2 (few-shot prompt)", "comparisons": len(prompts),
               "prompt_tokens_min_max": [min(lengths), max(lengths)],
               "shared_prefix_tokens": prefix, "seconds": seconds,
               "identical_outputs": rows[1][4]}
    if args.batched_baseline:
        summary["speedup_vs_batched_no_cache"] = (median(seconds["batched"])
                                                  / median(seconds["ours"]))
    settings = {"prompt": args.prompt, "questions": args.questions, "samples": args.samples,
                "max_new_tokens": args.max_new_tokens, "batch_size": args.batch_size,
                "repeats": args.repeats}
    report = Report(f"judge tournament ({args.prompt} prompt)", args.model, settings,
                    ["variant", "median s", "ms per comparison", "generated tokens",
                     "outputs identical to plain"], rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
