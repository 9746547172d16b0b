"""``scripts/experiment_plan.py``: each row of a profile's tables with what it trains."""

from __future__ import annotations

from saturated_dag.profiles import load_profile
from saturated_dag.reporting.plan_text import markdown, task_plan


def test_the_plan_shows_each_rows_fixed_and_varied_settings_for_paper() -> None:
    profile = load_profile("paper")
    rows = {(r.table, r.label): r for r in task_plan(profile, "chain_sum")}
    own = rows[("DPO β and learning-rate sweep (Table 9)", "β=0.1, η=1e-5")]
    assert own.cell == "strict_saturated/dpo_self_judge_beta0.1_lr1e-05"
    assert (own.fixed["dpo_beta"], own.fixed["learning_rate"]) == (0.1, 1e-5)
    assert set(own.varied) == {"epochs", "batch_size"} and own.configurations == 12
    zero = rows[("σ-RRHF rank-loss weight λ (Figure 6)", "λ=0")]
    assert (zero.seeds, zero.adapters, zero.fixed["rrhf_rank_weight"]) == (3, 54, 0.0)
    no_sft = rows[("σ-RRHF variants (Table 8)", "no_sft")]
    assert no_sft.fixed["rrhf_rank_weight"] == 0.1 and no_sft.fixed["rrhf_use_sft"] is False
    main = [r for r in rows.values() if r.table == "results" and "σ-RRHF" in r.label]
    assert main and all(r.fixed["rrhf_rank_weight"] == 0.1 for r in main)
    assert all("rrhf_rank_weight" not in r.varied for r in rows.values())


def test_the_plan_lists_gsm8k_without_strict_rows_and_paper_instruct_with_its_selection() -> None:
    assert not [r for r in task_plan(load_profile("paper"), "gsm8k")
                if r.cell.startswith("strict_saturated/")]
    text = markdown(load_profile("paper_instruct"))
    assert "**gsm8k**: 6 rows, 1,080 distinct adapters" in text
    assert "dpo_beta ∈ {0.1, 0.3, 0.5, 2, 5}" in text
