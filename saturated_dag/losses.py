"""σ-RRHF (Sec. 3.4, App. C.3): the rank loss with its ablations, and the SFT anchor.

Everything works on per-completion quantities already reduced over tokens, so the same
functions serve a trainer (batched groups) and hand-checked unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RrhfLossConfig:
    """The paper's σ-RRHF; each switch turns one ablation of App. C.3 on."""

    rank_weight: float = 0.1  # λ
    use_sft: bool = True  # False: "no SFT loss"
    hinge: bool = True  # False: "no hinge" (sum of σ(r_j - r_i)(p_i - p_j))
    logistic_weight: bool = True  # False: "no logistic weighting"


def sequence_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of log π(y_t | ...) over masked (completion) tokens, and their count, per row.

    ``logits`` are aligned with ``labels`` already (position t predicts ``labels[:, t]``).
    Gathering the label's logit and subtracting logsumexp avoids materialising a second
    batch x length x vocabulary tensor of log-probabilities.
    """
    logits = logits.float()
    picked = torch.gather(logits, -1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token_logp = picked - torch.logsumexp(logits, dim=-1)
    mask = mask.to(token_logp.dtype)
    return (token_logp * mask).sum(-1), mask.sum(-1)


def rank_loss(
    p: torch.Tensor, scores: torch.Tensor, group: torch.Tensor, config: RrhfLossConfig
) -> torch.Tensor:
    """Σ over ALL pairs (i, j) of the same group with r_i < r_j of w_ij · f(p_i − p_j).

    ``p`` are length-normalised log-probabilities, ``scores`` the quality scores r and
    ``group`` the question index of each completion. w_ij = σ(r_j − r_i) (or 1); f is the
    hinge max(0, ·) (or the identity). Equal scores give no pair.
    """
    same = group.unsqueeze(0) == group.unsqueeze(1)
    better = scores.unsqueeze(0) > scores.unsqueeze(1)  # [i, j]: r_j > r_i
    pairs = same & better
    margin = p.unsqueeze(1) - p.unsqueeze(0)  # [i, j]: p_i - p_j
    if config.hinge:
        margin = margin.clamp(min=0)
    gap = scores.unsqueeze(0) - scores.unsqueeze(1)  # [i, j]: r_j - r_i
    weight = torch.sigmoid(gap) if config.logistic_weight else torch.ones_like(gap)
    return (weight * margin * pairs).sum()


def sft_anchor(
    token_logp_sum: torch.Tensor,
    token_count: torch.Tensor,
    scores: torch.Tensor,
    group: torch.Tensor,
) -> torch.Tensor:
    """−log π(y_best | x) as a masked mean over the best completion's tokens, per group.

    The best completion of each group is its highest score (the first on ties); groups are
    averaged so each question counts once.
    """
    losses = []
    for g in torch.unique(group):
        idx = torch.nonzero(group == g).squeeze(-1)
        best = idx[torch.argmax(scores[idx])]
        losses.append(-token_logp_sum[best] / token_count[best].clamp(min=1))
    return torch.stack(losses).mean()


def rrhf_loss(
    token_logp_sum: torch.Tensor,
    token_count: torch.Tensor,
    scores: torch.Tensor,
    group: torch.Tensor,
    config: RrhfLossConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    """λ·L_rank + L_ft (or L_rank alone without the SFT term), with both parts for logging."""
    if not torch.isfinite(scores).all():
        raise ValueError("σ-RRHF scores must be finite")
    p = token_logp_sum / token_count.clamp(min=1)
    l_rank = rank_loss(p, scores, group, config)
    l_ft = sft_anchor(token_logp_sum, token_count, scores, group)
    total = config.rank_weight * l_rank + (l_ft if config.use_sft else 0.0)
    return total, {"rank_loss": float(l_rank.detach()), "sft_loss": float(l_ft.detach())}
