"""Mean token entropy of given completions: ours against a full softmax over a padded batch.

Plain: the whole batch right-padded, ``model(...).logits`` at every position, ``softmax`` and
``log_softmax`` over the vocabulary, ``-(p * log p).sum(-1)``, then a masked mean over each
completion. Ours: ``teacher_forced_mean_entropies`` (length-sorted passes of at most
``token_budget`` tokens, the output head on completion positions only, ``chunk`` at a time).
The completions are sampled once by the model itself. Peak extra memory is the peak of
tensor bytes allocated during the call (``benchmarks.common.PeakTensorMemory``).

    python -m benchmarks.bench_entropy --model arith-base
    python -m benchmarks.bench_entropy --model smollm2-135m-instruct --questions 4 --n 4
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
    peak_memory,
)
from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.entropy import teacher_forced_mean_entropies


@torch.no_grad()
def plain_entropy(model: Any, prompts: list[list[int]], completions: list[list[int]],
                  pad: int) -> list[float]:
    """Full-vocabulary softmax for every position of one right-padded batch."""
    seqs = [p + c for p, c in zip(prompts, completions, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    # Position t predicts token t+1: completion tokens are predicted from len(prompt)-1 on.
    scored = torch.zeros(len(seqs), width)
    for r, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        scored[r, len(p) - 1 : len(p) - 1 + len(c)] = 1
    logits = model(input_ids=ids, attention_mask=attention).logits
    p = torch.softmax(logits, dim=-1)
    log_p = torch.log_softmax(logits, dim=-1)
    entropy = -(p * log_p).sum(-1)
    return ((entropy * scored).sum(-1) / scored.sum(-1)).tolist()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--n", type=int, default=8, help="completions per question")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--token-budget", type=int, default=512)
    parser.add_argument("--chunk", type=int, default=128)
    args = parser.parse_args(argv)
    if args.toy:
        args.questions, args.n, args.max_new_tokens, args.repeats = 2, 2, 12, 1
    backend = load_backend(args.model, args.threads)
    model, pad = backend.model, backend.tokenizer.pad_token_id
    texts, _ = chain_sum_prompts(backend, args.questions)
    samples = backend.sample(texts, SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens,
                                                   seed=0))
    prompts = [backend.encode_prompt(texts[s.prompt_index]) for g in samples for s in g]
    completions = [s.token_ids for g in samples for s in g]
    in_generation = [s.mean_entropy for g in samples for s in g]

    def plain() -> list[float]:
        return plain_entropy(model, prompts, completions, pad)

    def ours() -> list[float]:
        return teacher_forced_mean_entropies(model, prompts, completions, args.token_budget,
                                             args.chunk, pad)

    peak = {"plain": peak_memory(plain)[0], "ours": peak_memory(ours)[0]}
    seconds, results = alternate({"plain": plain, "ours": ours}, args.repeats,
                                 warmup=not args.toy)
    diff = max(abs(a - b) for a, b in zip(results["plain"], results["ours"], strict=True))
    diff_generation = max(abs(a - b) for a, b in zip(results["plain"], in_generation,
                                                     strict=True))
    width = max(len(p) + len(c) for p, c in zip(prompts, completions, strict=True))
    rows = [["plain: softmax over padded batch", median(seconds["plain"]),
             peak["plain"] / 2**20, 0.0],
            ["ours: chunked teacher forcing", median(seconds["ours"]), peak["ours"] / 2**20,
             diff]]
    summary = {
        "memory_ratio": peak["ours"] / peak["plain"], "memory_target": "<= 0.10",
        "time_ratio": median(seconds["ours"]) / median(seconds["plain"]),
        "time_target": "<= 1",
        "max_abs_diff": diff, "diff_target": "<= 1e-4",
        "max_abs_diff_in_generation_vs_plain": diff_generation,
        "sequences": len(completions), "padded_width": width,
        "completion_tokens": sum(len(c) for c in completions),
        "seconds": seconds,
    }
    settings = {"questions": args.questions, "n": args.n, "max_new_tokens": args.max_new_tokens,
                "token_budget": args.token_budget, "chunk": args.chunk, "repeats": args.repeats}
    report = Report("entropy", args.model, settings,
                    ["variant", "median s", "peak extra MiB", "max |ΔH̄| vs plain"], rows,
                    summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
