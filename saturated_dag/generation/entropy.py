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
def teacher_forced_mean_entropy(
    model: torch.nn.Module,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    chunk: int = 256,
) -> float:
    """Mean entropy over the completion's positions from one forward pass.

    Only ``chunk`` positions' logits are turned into distributions at a time, so peak extra
    memory is chunk x vocabulary rather than length x vocabulary.
    """
    if not completion_ids:
        raise ValueError("completion has no tokens: its mean entropy is undefined")
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=model.device)
    hidden = model.model(input_ids=ids).last_hidden_state[0]
    # Position t predicts token t+1: completion tokens are predicted from len(prompt)-1 on.
    start = len(prompt_ids) - 1
    positions = hidden[start : start + len(completion_ids)]
    head = model.get_output_embeddings()
    total = 0.0
    for i in range(0, positions.shape[0], chunk):
        total += token_entropy(head(positions[i : i + chunk])).double().sum().item()
    return total / len(completion_ids)
