"""σ-RRHF training step: our vectorised loss against a Python loop over groups.

Two measurements, forward and backward each time:

* loss only: per-completion log-probability sums (requiring grad) of G groups x n
  completions -> ``rrhf_loss`` (all groups at once) against a loop that computes each group's
  rank and SFT terms in turn (how the reference RRHF code handles one query at a time);
* loss side of a step: the model's logits of a padded batch of groups (a leaf tensor requiring
  grad) -> per-completion sums -> loss -> gradient of the logits. Plain slices the logits,
  takes ``log_softmax`` over the vocabulary and gathers, then the loop loss; ours is
  ``RrhfTrainer.compute_loss``'s path (``sequence_logprobs``: label logit minus a chunked
  logsumexp, one vocabulary-sized tensor: the gradient). The model's own forward and backward
  are the same in both and left out.

    python -m benchmarks.bench_training --model arith-base
    python -m benchmarks.bench_training --model smollm2-135m-instruct --step-groups 2
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
from saturated_dag.training.losses import RrhfLossConfig, rrhf_loss, sequence_logprobs


def loop_rrhf_loss(sums: torch.Tensor, counts: torch.Tensor, scores: torch.Tensor,
                   group: torch.Tensor, config: RrhfLossConfig) -> torch.Tensor:
    """mean over groups of λ·L_rank + L_ft, one iteration per group (the plain way)."""
    rank = []
    sft = []
    for g in torch.unique(group).tolist():
        idx = torch.nonzero(group == g).squeeze(-1)
        p = sums[idx] / counts[idx].clamp(min=1)
        r = scores[idx]
        margin = p.unsqueeze(1) - p.unsqueeze(0)
        if config.hinge:
            margin = margin.clamp(min=0)
        gap = r.unsqueeze(0) - r.unsqueeze(1)
        weight = torch.sigmoid(gap) if config.logistic_weight else torch.ones_like(gap)
        rank.append((weight * margin * (gap > 0)).sum())
        best = int(torch.argmax(r))
        sft.append(-sums[idx][best] / counts[idx][best].clamp(min=1))
    l_rank, l_ft = torch.stack(rank).mean(), torch.stack(sft).mean()
    return config.rank_weight * l_rank + (l_ft if config.use_sft else 0.0)


def plain_sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Full log-softmax over the vocabulary, then gather (the plain way)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    token = torch.gather(logp, -1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    mask = mask.float()
    return (token * mask).sum(-1), mask.sum(-1)


def _loss_only(groups: int, n: int, repeats: int, config: RrhfLossConfig,
               toy: bool) -> tuple[list[Any], dict[str, Any]]:
    gen = torch.Generator().manual_seed(0)
    sums = (-torch.rand(groups * n, generator=gen, dtype=torch.float64) * 50).float()
    counts = torch.randint(5, 60, (groups * n,), generator=gen).float()
    scores = torch.rand(groups * n, generator=gen)
    group = torch.arange(groups).repeat_interleave(n)

    def run(fn: Any) -> Any:
        def call() -> tuple[float, torch.Tensor]:
            leaf = sums.clone().requires_grad_()
            loss = fn(leaf, counts, scores, group, config)
            loss.backward()
            return float(loss.detach()), leaf.grad

        return call

    seconds, results = alternate({
        "plain": run(loop_rrhf_loss),
        "ours": run(lambda *a: rrhf_loss(*a)[0]),
    }, repeats, warmup=not toy)
    diff = abs(results["plain"][0] - results["ours"][0])
    grad_diff = float((results["plain"][1] - results["ours"][1]).abs().max())
    rows = [[f"loss only, {groups} groups x {n}: {name}", median(seconds[name]) * 1e3, "", ""]
            for name in ("plain", "ours")]
    return rows, {"loss_only_speedup": median(seconds["plain"]) / median(seconds["ours"]),
                  "loss_only_abs_diff": diff, "loss_only_grad_max_diff": grad_diff,
                  "loss_only_seconds": seconds}


def _loss_side(args: Any, config: RrhfLossConfig) -> tuple[list[Any], dict[str, Any]]:
    backend = load_backend(args.model, args.threads)
    texts, _ = chain_sum_prompts(backend, args.step_groups)
    samples = backend.sample(texts, SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens,
                                                   seed=0))
    seqs, masks, group = [], [], []
    for g, row in enumerate(samples):
        prompt = backend.encode_prompt(texts[g])
        for s in row:
            seqs.append(prompt + s.token_ids)
            masks.append([0] * len(prompt) + [1] * len(s.token_ids))
            group.append(g)
    width = max(len(s) for s in seqs)
    pad = backend.tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    mask = torch.tensor([m + [0] * (width - len(m)) for m in masks])
    with torch.no_grad():
        logits = backend.model(input_ids=ids, attention_mask=attention).logits
    scores = torch.rand(len(seqs), generator=torch.Generator().manual_seed(1))
    groups = torch.tensor(group)
    shifted = torch.nn.functional.pad(ids[:, 1:], (0, 1), value=0)
    shifted_mask = torch.nn.functional.pad(mask[:, 1:], (0, 1), value=0)

    def plain_step() -> tuple[float, torch.Tensor]:
        leaf = logits.detach().requires_grad_()
        sums, counts = plain_sequence_logprobs(leaf[:, :-1], ids[:, 1:], mask[:, 1:])
        loss = loop_rrhf_loss(sums, counts, scores, groups, config)
        loss.backward()
        return float(loss.detach()), leaf.grad

    def our_step() -> tuple[float, torch.Tensor]:
        # As RrhfTrainer.compute_loss: labels shifted, logits not sliced.
        leaf = logits.detach().requires_grad_()
        sums, counts = sequence_logprobs(leaf, shifted, shifted_mask)
        loss = rrhf_loss(sums, counts, scores, groups, config)[0]
        loss.backward()
        return float(loss.detach()), leaf.grad

    variants = {"plain": plain_step, "ours": our_step}
    peak = {name: peak_memory(fn)[0] for name, fn in variants.items()}
    seconds, results = alternate(variants, args.repeats, warmup=not args.toy)
    grad_diff = float((results["plain"][1] - results["ours"][1]).abs().max())
    label = f"loss side of a step, {args.step_groups} groups x {args.n}, width {width}"
    rows = [[f"{label}: {name}", median(seconds[name]) * 1e3, peak[name] / 2**20, ""]
            for name in ("plain", "ours")]
    rows[1][3] = grad_diff
    return rows, {"step_speedup": median(seconds["plain"]) / median(seconds["ours"]),
                  "step_memory_ratio": peak["ours"] / peak["plain"],
                  "step_loss_abs_diff": abs(results["plain"][0] - results["ours"][0]),
                  "step_grad_max_diff": grad_diff, "step_seconds": seconds}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=64, help="groups of the loss-only run")
    parser.add_argument("--n", type=int, default=8, help="completions per group")
    parser.add_argument("--step-groups", type=int, default=4,
                        help="questions per device batch (per_device_batch_size // n)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    if args.toy:
        args.groups, args.n, args.step_groups, args.max_new_tokens = 3, 3, 2, 8
        args.repeats = 1
    config = RrhfLossConfig()
    rows, summary = _loss_only(args.groups, args.n, max(args.repeats, 5), config, args.toy)
    more_rows, more = _loss_side(args, config)
    summary.update(more)
    settings = {"groups": args.groups, "n": args.n, "step_groups": args.step_groups,
                "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
                "loss": "σ-RRHF, λ=0.1, hinge, logistic weight, SFT anchor"}
    report = Report("training step (σ-RRHF)", args.model, settings,
                    ["variant", "median ms", "peak extra MiB", "max |Δgrad| vs plain"],
                    rows + more_rows, summary)
    report.emit(args.out)
    return {"rows": rows + more_rows, "summary": summary}


if __name__ == "__main__":
    main()
