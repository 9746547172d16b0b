"""The paper profiles hold the paper's settings (App. B, Table 5) and the rules of issue 13."""

import pytest

from saturated_dag.config import ProfileError
from saturated_dag.profiles import load_profile

PAPER = ("paper", "paper_instruct")


@pytest.mark.parametrize("name", PAPER)
def test_paper_profiles_follow_table_5_and_the_papers_rules(name: str) -> None:
    profile = load_profile(name)
    t = profile.training
    assert t.max_length == 2048  # L in Table 5
    assert t.batch_size in (2, 4, 8, 16)  # B in Table 5, counted in completions / pairs
    assert t.per_device_batch_size >= profile.sampling.n  # σ-RRHF: a question stays together
    assert t.dpo_distinct_texts is False  # y_w = argmax, y_l = argmin
    assert profile.answer_check == "math_verify"
    assert t.dtype == "bfloat16" and t.gradient_checkpointing  # docs/training-memory.md
    assert profile.scoring.entropy_include_eos is True  # the stated reading (paper-differences)


def test_instruct_policy_samples_without_thinking_like_its_judges() -> None:
    assert load_profile("paper_instruct").policy.enable_thinking is False
    assert load_profile("paper").policy.enable_thinking is None  # a base model: no template


def test_paper_evaluates_chain_sum_on_the_papers_eval_set() -> None:
    cs = load_profile("paper").chain_sum
    assert (cs.eval_source, cs.eval_limit) == ("hannoh/chainsum_eval", 200)
    for name in ("demo", "ci"):
        assert load_profile(name).chain_sum.eval_source is None  # generated eval sets


def test_rrhf_per_device_batch_below_n_is_refused_naming_both_fields() -> None:
    with pytest.raises(ProfileError, match=r"per_device_batch_size \(4\) must be at least "
                                           r"sampling.n \(8\)"):
        load_profile("demo", {"training": {"batch_size": 4, "per_device_batch_size": 4}})
    # without σ-RRHF anywhere (methods and sweeps), smaller batches are fine
    load_profile("demo", {"training": {"batch_size": 4, "per_device_batch_size": 4,
                                       "methods": ["dpo", "sft"],
                                       "sweeps": {"rank_weight": None,
                                                  "rrhf_variants": None}}})
