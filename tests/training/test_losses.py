"""σ-RRHF against values computed by hand."""

import math

import pytest
import torch

from saturated_dag.training.losses import (
    RrhfLossConfig,
    rank_loss,
    rrhf_loss,
    sequence_logprobs,
    sft_anchor,
)

sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731


def _t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_hinge_is_zero_for_correctly_ordered_pairs() -> None:
    # higher score already has higher p: nothing to penalise
    assert rank_loss(_t(-3.0, -2.0, -1.0), _t(0.0, 0.5, 1.0), torch.zeros(3),
                     RrhfLossConfig()).item() == 0.0


def test_sigma_rrhf_by_hand() -> None:
    p, r = _t(-1.0, -2.0, -1.5), _t(0.0, 1.0, 0.5)
    # pairs (i worse, j better): (0,1) (0,2) (2,1)
    expected = (sig(1.0) * max(0, -1.0 + 2.0) + sig(0.5) * max(0, -1.0 + 1.5)
                + sig(0.5) * max(0, -1.5 + 2.0))
    got = rank_loss(p, r, torch.zeros(3), RrhfLossConfig())
    assert got.item() == pytest.approx(expected)


def test_ablations_by_hand() -> None:
    p, r = _t(-1.0, -2.0, -1.5), _t(0.0, 1.0, 0.5)
    g = torch.zeros(3)
    no_weight = rank_loss(p, r, g, RrhfLossConfig(logistic_weight=False))
    assert no_weight.item() == pytest.approx(1.0 + 0.5 + 0.5)
    no_hinge = rank_loss(_t(-3.0, -1.0), _t(0.0, 1.0), torch.zeros(2),
                         RrhfLossConfig(hinge=False))
    assert no_hinge.item() == pytest.approx(sig(1.0) * (-3.0 + 1.0))  # negative: rewards order


def test_sigmoid_weight_halves_at_equal_scores_and_equal_scores_make_no_pair() -> None:
    tiny_gap = rank_loss(_t(0.0, -1.0), _t(0.0, 1e-9), torch.zeros(2), RrhfLossConfig())
    assert tiny_gap.item() == pytest.approx(0.5 * 1.0)
    tied = rank_loss(_t(0.0, -1.0), _t(0.3, 0.3), torch.zeros(2), RrhfLossConfig())
    assert tied.item() == 0.0


def test_pairs_only_within_a_question() -> None:
    p, r = _t(0.0, -1.0), _t(0.0, 1.0)
    assert rank_loss(p, r, torch.tensor([0, 1]), RrhfLossConfig()).item() == 0.0


def test_sft_anchor_is_masked_mean_of_best_completion() -> None:
    sums, counts = _t(-4.0, -9.0, -2.0), _t(2.0, 3.0, 4.0)
    scores, group = _t(0.1, 0.9, 0.5), torch.tensor([0, 0, 1])
    # question 0: best is completion 1 (-9/3); question 1: completion 2 (-2/4)
    assert sft_anchor(sums, counts, scores, group).item() == pytest.approx((3.0 + 0.5) / 2)


def test_total_combines_lambda_and_switches() -> None:
    sums, counts, scores, group = _t(-2.0, -6.0), _t(2.0, 2.0), _t(0.0, 1.0), torch.zeros(2)
    # p = (-1, -3); the better one (index 1) has lower p: hinge 2, weight sig(1)
    rank, ft = sig(1.0) * 2.0, 3.0
    total, parts = rrhf_loss(sums, counts, scores, group, RrhfLossConfig(rank_weight=0.1))
    assert total.item() == pytest.approx(0.1 * rank + ft)
    assert parts == pytest.approx({"rank_loss": rank, "sft_loss": ft})
    no_sft, _ = rrhf_loss(sums, counts, scores, group, RrhfLossConfig(use_sft=False))
    assert no_sft.item() == pytest.approx(0.1 * rank)
    with pytest.raises(ValueError, match="finite"):
        rrhf_loss(sums, counts, _t(0.0, math.nan), group, RrhfLossConfig())


def test_sequence_logprobs_matches_log_softmax_over_masked_tokens() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.randint(0, 7, (2, 5))
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    sums, counts = sequence_logprobs(logits, labels, mask)
    ref = torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    assert sums.tolist() == pytest.approx((ref * mask).sum(-1).tolist(), abs=1e-5)
    assert counts.tolist() == [3.0, 2.0]


def test_batch_loss_is_the_mean_over_questions_issue_example() -> None:
    # Issue 13, item 1: two identical questions, scores [0, 1], log-probs [-1, -2], lengths 1,
    # λ = 1. The rank loss used to be summed over questions (3.4621); per question it is
    # σ(1)·max(0, -1 - -2) + 2 = 2.7311, and a batch of copies must give the same.
    sums, counts = _t(-1.0, -2.0, -1.0, -2.0), _t(1.0, 1.0, 1.0, 1.0)
    scores, group = _t(0.0, 1.0, 0.0, 1.0), torch.tensor([0, 0, 1, 1])
    total, parts = rrhf_loss(sums, counts, scores, group, RrhfLossConfig(rank_weight=1.0))
    assert total.item() == pytest.approx(sig(1.0) + 2.0) == pytest.approx(2.7311, abs=1e-4)
    assert parts == pytest.approx({"rank_loss": sig(1.0), "sft_loss": 2.0})  # per question
    alone, _ = rrhf_loss(sums[:2], counts[:2], scores[:2], group[:2],
                         RrhfLossConfig(rank_weight=1.0))
    assert alone.item() == pytest.approx(total.item())


def _three_questions() -> tuple[torch.Tensor, ...]:
    sums = _t(-2.0, -6.0, -3.0, -1.0, -4.0, -5.0, -2.5)
    counts = _t(2.0, 2.0, 3.0, 1.0, 4.0, 5.0, 1.0)
    scores = _t(0.0, 1.0, 0.5, 0.2, 0.9, 0.3, 0.1)
    group = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    return sums, counts, scores, group


@pytest.mark.parametrize("config", [
    RrhfLossConfig(), RrhfLossConfig(use_sft=False), RrhfLossConfig(hinge=False),
    RrhfLossConfig(logistic_weight=False), RrhfLossConfig(rank_weight=1.0)])
def test_batch_loss_does_not_depend_on_how_many_questions_share_it(
        config: RrhfLossConfig) -> None:
    sums, counts, scores, group = _three_questions()
    each = [rrhf_loss(sums[group == g], counts[group == g], scores[group == g],
                      group[group == g], config)[0].item() for g in range(3)]
    total, parts = rrhf_loss(sums, counts, scores, group, config)
    assert total.item() == pytest.approx(sum(each) / 3)  # the mean, whatever the batch
    twice = rrhf_loss(sums.repeat(2), counts.repeat(2), scores.repeat(2),
                      torch.cat([group, group + 3]), config)[0]
    assert twice.item() == pytest.approx(total.item())
    p = sums / counts
    assert parts["rank_loss"] == pytest.approx(rank_loss(p, scores, group, config).item())
    assert parts["sft_loss"] == pytest.approx(sft_anchor(sums, counts, scores, group).item())


def test_micro_batches_divided_by_the_step_questions_sum_to_the_step_mean() -> None:
    # A trainer accumulating micro-batches passes the step's question count: the summed
    # micro-batch losses and gradients are those of the whole batch, even for uneven splits.
    sums, counts, scores, group = _three_questions()
    config = RrhfLossConfig(rank_weight=0.5)
    whole = sums.clone().requires_grad_()
    rrhf_loss(whole, counts, scores, group, config)[0].backward()
    parts = sums.clone().requires_grad_()
    first, rest = group < 2, group >= 2  # two questions, then one
    loss = sum(rrhf_loss(parts[m], counts[m], scores[m], group[m], config, questions=3)[0]
               for m in (first, rest))
    loss.backward()
    assert loss.item() == pytest.approx(rrhf_loss(sums, counts, scores, group, config)[0].item())
    assert torch.allclose(parts.grad, whole.grad)


def test_sft_anchor_summed_over_tokens_is_the_papers_literal_form() -> None:
    """``rrhf_sft_token_mean: false``: L_ft = −log π(y_best | x), the sequence's summed NLL."""
    sums, counts = _t(-4.0, -9.0, -2.0), _t(2.0, 3.0, 4.0)
    scores, group = _t(0.1, 0.9, 0.5), torch.tensor([0, 0, 1])
    summed = RrhfLossConfig(rank_weight=0.0, sft_token_mean=False)
    total, parts = rrhf_loss(sums, counts, scores, group, summed)
    assert total.item() == pytest.approx((9.0 + 2.0) / 2)  # mean over questions of the sums
    assert parts["sft_loss"] == pytest.approx(5.5)
    mean, _ = rrhf_loss(sums, counts, scores, group, RrhfLossConfig(rank_weight=0.0))
    assert mean.item() == pytest.approx((3.0 + 0.5) / 2)


def test_the_profile_switch_reaches_the_trainer_config() -> None:
    from saturated_dag.profiles import load_profile
    from saturated_dag.training.train import trainer_config

    def config(profile):
        return trainer_config("rrhf", profile.training, "/nonexistent", "float32")

    assert config(load_profile("demo")).sft_token_mean is True
    literal = load_profile("demo", {"training": {"rrhf_sft_token_mean": False}})
    assert config(literal).sft_token_mean is False
