"""σ-RRHF (Sec. 3.4, App. C.3): the rank loss with its ablations, and the SFT anchor.

The loss is per question, L(q) = λ·L_rank(q) + L_ft(q), and a batch's loss is its mean over
questions, so λ means the same whatever the batch size.

Everything works on per-completion quantities already reduced over tokens, so the same
functions serve a trainer (batched groups) and hand-checked unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class RrhfLossConfig:
    """The paper's σ-RRHF; each switch turns one ablation of App. C.3 on."""

    rank_weight: float = 0.1  # λ
    use_sft: bool = True  # False: "no SFT loss"
    hinge: bool = True  # False: "no hinge" (sum of σ(r_j - r_i)(p_i - p_j))
    logistic_weight: bool = True  # False: "no logistic weighting"
    sft_token_mean: bool = True
    """L_ft as the mean token NLL of y_best (RRHF's and the authors' code); False: the
    sequence's summed NLL, −log π(y_best | x) as the paper's equation writes it."""


def _row_blocks(logits: torch.Tensor, rows: int) -> list[tuple[torch.Tensor, tuple]]:
    """(positions x vocabulary view, index into the leading dims) blocks of ``rows`` rows.

    A contiguous tensor is viewed flat (few, large blocks); otherwise (a slice of a larger
    tensor) it is walked one sequence at a time, never copied.
    """
    if logits.is_contiguous():
        flat, lead = logits.view(-1, logits.shape[-1]), logits.shape[:-1]
        return [(flat[i : i + rows], (slice(i, i + rows), lead))
                for i in range(0, flat.shape[0], rows)]
    return [(logits[b, i : i + rows], (b, slice(i, i + rows)))
            for b in range(logits.shape[0]) for i in range(0, logits.shape[1], rows)]


def _at(target: torch.Tensor, index: tuple) -> torch.Tensor:
    """The part of ``target`` (shaped like the logits' leading dims) a block covers."""
    if len(index) == 2 and isinstance(index[1], torch.Size):
        return target.view(-1, *target.shape[len(index[1]):])[index[0]]
    return target[index]


class _TokenLogprob(torch.autograd.Function):
    """log π(label) per position, with one vocabulary-sized tensor in all: the gradient.

    The plain ``log_softmax(logits).gather(...)`` keeps the log-probabilities for backward and
    its backward allocates two more batch x length x vocabulary tensors (the scattered
    gradient of ``gather`` and that of ``log_softmax``). Here the forward computes logsumexp
    over blocks of about ``block`` elements and saves only it; the backward writes
    ``-g * softmax`` straight into the gradient and adds ``g`` at the labels.
    """

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, labels: torch.Tensor, block: int
                ) -> torch.Tensor:
        rows = max(1, block // logits.shape[-1])
        lse = torch.empty(labels.shape, dtype=torch.float32, device=logits.device)
        for part, index in _row_blocks(logits, rows):
            _at(lse, index).copy_(torch.logsumexp(part.float(), -1))
        picked = torch.gather(logits, -1, labels.unsqueeze(-1)).squeeze(-1).float()
        ctx.save_for_backward(logits, labels, lse)
        ctx.rows = rows
        return picked - lse

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        logits, labels, lse = ctx.saved_tensors
        grad = grad.float()
        out = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        for part, index in _row_blocks(logits, ctx.rows):
            target, g = _at(out, index), _at(grad, index).unsqueeze(-1)
            if part.dtype == torch.float32:  # in place in the gradient: no temporary
                torch.sub(part, _at(lse, index).unsqueeze(-1), out=target)
                target.exp_().mul_(-g)
            else:
                soft = part.float() - _at(lse, index).unsqueeze(-1)
                target.copy_(soft.exp_().mul_(-g))
        out.scatter_add_(-1, labels.unsqueeze(-1), grad.unsqueeze(-1).to(out.dtype))
        return out, None, None


def sequence_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, block: int = 1 << 20
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of log π(y_t | ...) over masked (completion) tokens, and their count, per row.

    ``logits`` are aligned with ``labels`` already (position t predicts ``labels[:, t]``).
    Log-probabilities come from ``_TokenLogprob``: the label's logit minus logsumexp, so no
    batch x length x vocabulary tensor of log-probabilities is ever materialised (temporaries
    hold about ``block`` elements).
    """
    token_logp = _TokenLogprob.apply(logits, labels.clamp(min=0), block)
    mask = mask.to(token_logp.dtype)
    return (token_logp * mask).sum(-1), mask.sum(-1)


def _group_table(group: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Items laid out as groups x (largest group size): index table and valid mask.

    ``table[g, k]`` is the k-th item of the g-th distinct group (0 where ``valid`` is false).
    """
    _, slot = torch.unique(group, return_inverse=True)
    sizes = torch.bincount(slot)
    order = torch.argsort(slot, stable=True)
    starts = torch.cumsum(sizes, 0) - sizes
    within = torch.arange(len(slot), device=slot.device) - starts[slot[order]]
    table = torch.full((len(sizes), int(sizes.max())), -1, dtype=torch.long, device=slot.device)
    table[slot[order], within] = order
    return table.clamp(min=0), table >= 0


def rank_loss_per_question(
    p: torch.Tensor, scores: torch.Tensor, group: torch.Tensor, config: RrhfLossConfig
) -> torch.Tensor:
    """L_rank(q) = Σ over the pairs (i, j) of question q with r_i < r_j of w_ij · f(p_i − p_j).

    One value per distinct ``group`` (in sorted group order). ``p`` are length-normalised
    log-probabilities, ``scores`` the quality scores r and ``group`` the question index of
    each completion. w_ij = σ(r_j − r_i) (or 1); f is the hinge max(0, ·) (or the identity).
    Equal scores give no pair. Vectorised over groups: pairs are formed within each group
    (G x k x k), not over the whole batch (N x N).
    """
    table, valid = _group_table(group)
    p, r = p[table], scores[table]
    pairs = valid.unsqueeze(1) & valid.unsqueeze(2)
    pairs = pairs & (r.unsqueeze(1) > r.unsqueeze(2))  # [g, i, j]: r_j > r_i
    margin = p.unsqueeze(2) - p.unsqueeze(1)  # [g, i, j]: p_i - p_j
    if config.hinge:
        margin = margin.clamp(min=0)
    gap = r.unsqueeze(1) - r.unsqueeze(2)  # [g, i, j]: r_j - r_i
    weight = torch.sigmoid(gap) if config.logistic_weight else torch.ones_like(gap)
    return (weight * margin * pairs).sum((1, 2))


def rank_loss(
    p: torch.Tensor, scores: torch.Tensor, group: torch.Tensor, config: RrhfLossConfig
) -> torch.Tensor:
    """The per-question rank loss (``rank_loss_per_question``) averaged over the questions.

    A mean, not a sum: the loss of a batch must not grow with how many questions share it
    (the paper's L is per question; Sec. 3.4).
    """
    return rank_loss_per_question(p, scores, group, config).mean()


def sft_anchor_per_question(
    token_logp_sum: torch.Tensor,
    token_count: torch.Tensor,
    scores: torch.Tensor,
    group: torch.Tensor,
    token_mean: bool = True,
) -> torch.Tensor:
    """L_ft(q) = −log π(y_best | x) as a masked mean over the best completion's tokens
    (``token_mean=False``: summed over them).

    One value per distinct ``group`` (sorted, as ``rank_loss_per_question``). The best
    completion of each group is its highest score (the first on ties). Vectorised over
    groups (no Python loop): a per-group max by scatter, then the first index reaching it.
    """
    _, slot = torch.unique(group, return_inverse=True)
    groups = int(slot.max()) + 1
    top = torch.full((groups,), -torch.inf, dtype=scores.dtype, device=scores.device)
    top = top.scatter_reduce(0, slot, scores, reduce="amax")
    index = torch.arange(len(scores), device=scores.device)
    candidates = torch.where(scores == top[slot], index, len(scores))
    first = torch.full((groups,), len(scores), dtype=index.dtype, device=scores.device)
    best = first.scatter_reduce(0, slot, candidates, reduce="amin")
    if not token_mean:
        return -token_logp_sum[best]
    return -token_logp_sum[best] / token_count[best].clamp(min=1)


def sft_anchor(
    token_logp_sum: torch.Tensor,
    token_count: torch.Tensor,
    scores: torch.Tensor,
    group: torch.Tensor,
) -> torch.Tensor:
    """L_ft averaged over the questions, so each question counts once."""
    return sft_anchor_per_question(token_logp_sum, token_count, scores, group).mean()


def rrhf_loss(
    token_logp_sum: torch.Tensor,
    token_count: torch.Tensor,
    scores: torch.Tensor,
    group: torch.Tensor,
    config: RrhfLossConfig,
    questions: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Σ_q [λ·L_rank(q) + L_ft(q)] / ``questions``, with both parts' per-question means.

    ``questions`` defaults to the number of questions here, which makes the loss the MEAN
    over questions of the paper's per-question loss L = λ·L_rank^σ + L_ft (Sec. 3.4): it does
    not depend on how many questions share a batch. A trainer that accumulates gradients
    over micro-batches passes the question count of the whole optimizer step instead, so
    the summed micro-batch losses are that step's mean exactly (micro-batches may hold
    different numbers of questions). Without the SFT term (``use_sft=False``) it is
    λ·L_rank alone. The logged parts are means over this batch's questions.
    """
    if not torch.isfinite(scores).all():
        raise ValueError("σ-RRHF scores must be finite")
    p = token_logp_sum / token_count.clamp(min=1)
    l_rank = rank_loss_per_question(p, scores, group, config)
    l_ft = sft_anchor_per_question(token_logp_sum, token_count, scores, group,
                                   config.sft_token_mean)
    per_question = config.rank_weight * l_rank + (l_ft if config.use_sft else 0.0)
    divisor = len(l_rank) if questions is None else questions
    total = per_question.sum() / divisor
    return total, {"rank_loss": float(l_rank.detach().mean()),
                   "sft_loss": float(l_ft.detach().mean())}
