"""Mean token entropy at temperature 1 (the paper's H-bar), without full-vocabulary tensors.

Two routes, which agree on the same tokens: ``EntropyTracker`` is a logits processor that
accumulates each step's entropy while ``generate`` samples (one batch x vocabulary row at a
time); ``teacher_forced_mean_entropy`` recomputes it from given tokens in chunks of positions,
for backends (vLLM) that do not expose full distributions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) over the last dimension, in nats, computed in float32."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


class EntropyTracker(LogitsProcessor):
    """Accumulates per-sequence entropy of the raw next-token distribution.

    It must run before temperature/top-p (``generate`` appends those warpers after custom
    processors) and leaves the scores untouched. A sequence stops counting after it has emitted
    an EOS; the EOS step itself counts, as it is a generated token.
    """

    def __init__(self, prompt_length: int, eos_token_ids: Sequence[int]):
        self.prompt_length = prompt_length
        self.eos = torch.tensor(sorted(set(eos_token_ids)), dtype=torch.long)
        self.total: torch.Tensor | None = None
        self.count: torch.Tensor | None = None
        self.finished: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = scores.shape[0]
        if self.total is None:
            self.total = torch.zeros(batch, dtype=torch.float64)
            self.count = torch.zeros(batch, dtype=torch.long)
            self.finished = torch.zeros(batch, dtype=torch.bool)
        if input_ids.shape[1] > self.prompt_length:
            last = input_ids[:, -1].cpu()
            self.finished |= torch.isin(last, self.eos)
        active = ~self.finished
        self.total += torch.where(active, token_entropy(scores).cpu().double(), 0.0)
        self.count += active.long()
        return scores

    def means(self) -> list[float]:
        if self.total is None:
            return []
        return (self.total / self.count.clamp(min=1)).tolist()


@torch.no_grad()
def teacher_forced_mean_entropies(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    token_budget: int = 512,
    chunk: int = 128,
    pad_token_id: int = 0,
) -> list[float]:
    """Mean entropy over each completion's positions, for many (prompt, completion) pairs.

    Why not one padded batch through ``model(...).logits``: that holds batch x length x
    vocabulary floats (several copies, for the softmax and its log), which at a 49k vocabulary
    dwarfs the model. Here sequences are sorted by length and packed into passes of at most
    ``token_budget`` padded tokens; each pass keeps only hidden states, and the output head is
    applied to completion positions alone, ``chunk`` of them at a time. Right padding with
    causal attention leaves every real position exactly as in an unpadded pass.
    """
    if len(prompts) != len(completions):
        raise ValueError("one completion per prompt")
    for completion in completions:
        if not completion:
            raise ValueError("completion has no tokens: its mean entropy is undefined")
    device = model.device
    head = model.get_output_embeddings()
    order = sorted(range(len(prompts)), key=lambda i: -(len(prompts[i]) + len(completions[i])))
    totals = torch.zeros(len(prompts), dtype=torch.float64)
    start = 0
    while start < len(order):
        width = len(prompts[order[start]]) + len(completions[order[start]])
        rows = max(1, min(len(order) - start, token_budget // width))
        batch = order[start : start + rows]
        start += rows
        ids = torch.full((rows, width), pad_token_id, dtype=torch.long)
        owner, flat = [], []  # per completion position: its pair, and its index in ids
        for r, i in enumerate(batch):
            seq = list(prompts[i]) + list(completions[i])
            ids[r, : len(seq)] = torch.tensor(seq)
            # Position t predicts token t+1: completion tokens from len(prompt)-1 on.
            first = r * width + len(prompts[i]) - 1
            flat.extend(range(first, first + len(completions[i])))
            owner.extend([i] * len(completions[i]))
        hidden = model.model(input_ids=ids.to(device)).last_hidden_state
        hidden = hidden.reshape(rows * width, -1)[torch.tensor(flat, device=device)]
        del ids
        owners = torch.tensor(owner)
        for k in range(0, hidden.shape[0], chunk):
            h = token_entropy(head(hidden[k : k + chunk])).double().cpu()
            totals.index_add_(0, owners[k : k + chunk], h)
    lengths = torch.tensor([len(c) for c in completions], dtype=torch.float64)
    return (totals / lengths).tolist()


def teacher_forced_mean_entropy(
    model: torch.nn.Module,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    chunk: int = 256,
) -> float:
    """Mean entropy over one completion's positions (``teacher_forced_mean_entropies``)."""
    if not completion_ids:
        raise ValueError("completion has no tokens: its mean entropy is undefined")
    return teacher_forced_mean_entropies(model, [prompt_ids], [completion_ids], chunk=chunk)[0]
