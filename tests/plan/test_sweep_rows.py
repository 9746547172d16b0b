"""Every table row trains what it reports (App. B, C.2-C.4): a sweep row keeps the values it
sweeps whatever they are, the profile's own values included; main σ-RRHF rows hold λ = 0.1; no
row can train an adapter that equals the base model.

These use each profile's *default* values for every sweep family: the rows whose value equals
the profile's setting are the ones that used to lose it (12 of the 24 sweep rows of `paper`).
"""

from __future__ import annotations

from typing import Any

import pytest

from saturated_dag.config import ProfileError
from saturated_dag.experiments import (
    cell_adapters,
    configurations,
    inert,
    row_labels,
    sweeps,
    trained_adapters,
)
from saturated_dag.profiles import available_profiles, load_profile
from saturated_dag.reporting.labels import sweep_row_label

PAPER = ("paper", "paper_instruct")


def _with_every_sweep_at_its_defaults(name: str):
    """The profile, and for paper_instruct (no sweeps of its own) the three sweep families
    added at its own defaults, each with the profile's value among the swept ones."""
    profile = load_profile(name)
    if profile.training.sweeps.dpo_beta is not None:
        return profile
    t = profile.training
    return load_profile(name, {"training": {"methods": ["dpo", "rrhf"], "sweeps": {
        "rank_weight": {"split": "hard", "scorer": "self_judge",
                        "values": [0.0, t.rrhf_rank_weight, 1.0]},
        "rrhf_variants": {"split": "hard", "scorer": "self_judge"},
        "dpo_beta": {"split": "saturated", "scorer": "self_judge",
                     "betas": [t.dpo_beta, 5.0], "learning_rates": [t.learning_rate, 5e-6]}}}})


def _effective(profile, adapter) -> dict[str, Any]:
    return adapter.training(profile.training).model_dump()


@pytest.mark.parametrize("name", PAPER)
def test_every_row_trains_only_its_fixed_values(name: str) -> None:
    profile = _with_every_sweep_at_its_defaults(name)
    t, n = profile.training, profile.sampling.n
    for label, cell in row_labels(t):
        for config, seeds in cell_adapters(t, cell, n).items():
            for adapter in [config, *seeds]:
                held = {k: _effective(profile, adapter)[k] for k in cell.fixed}
                assert held == cell.fixed, (label, adapter.name)


@pytest.mark.parametrize("name", PAPER)
def test_rows_at_the_profiles_own_values_keep_them(name: str) -> None:
    profile = _with_every_sweep_at_its_defaults(name)
    t, n = profile.training, profile.sampling.n
    table = sweeps(t)
    # Table 9: the row β = default, η = default holds both, and is not the main cell
    [own] = [r for r in table["dpo_beta"]
             if r.settings == {"beta": t.dpo_beta, "lr": t.learning_rate}]
    main = next(c for _, c in row_labels(t) if c.split == own.experiment.split
                and c.method == "dpo" and c.scorer == "self_judge" and not c.fixed)
    assert own.experiment != main and own.experiment.name != main.name
    trained = configurations(t, own.experiment, n)
    assert {(_effective(profile, a)["dpo_beta"], _effective(profile, a)["learning_rate"])
            for a in trained} == {(t.dpo_beta, t.learning_rate)}
    assert len(trained) < len(configurations(t, main, n))  # the main cell selects β and η
    # Table 8: every variant holds λ = the profile's σ-RRHF weight, none selects it
    for row in table["rrhf_variants"]:
        assert {_effective(profile, a)["rrhf_rank_weight"]
                for a in configurations(t, row.experiment, n)} == {t.rrhf_rank_weight}
    # Figure 6: each λ row trains its λ only
    for row in table["rank_weight"]:
        assert {_effective(profile, a)["rrhf_rank_weight"]
                for a in configurations(t, row.experiment, n)} == {row.settings["lambda"]}


def test_paper_main_rrhf_rows_hold_lambda_01_and_select_lr_epochs_batch_only() -> None:
    profile = load_profile("paper")
    t, n = profile.training, profile.sampling.n
    assert t.rrhf_rank_weight == 0.1 and t.selection.rrhf_rank_weights is None
    rows = [(label, c) for label, c in row_labels(t) if c.method == "rrhf"]
    assert rows
    for label, cell in rows:
        trained = [_effective(profile, a) for a in configurations(t, cell, n)]
        varied = {k for k in ("learning_rate", "epochs", "batch_size", "rrhf_rank_weight",
                              "dpo_beta") if len({e[k] for e in trained}) > 1}
        assert "rrhf_rank_weight" not in varied, label
        if label.startswith("main"):
            assert {e["rrhf_rank_weight"] for e in trained} == {0.1}, label
            assert varied == {"learning_rate", "epochs", "batch_size"}, label


def test_figure_6_lambda_0_is_the_mean_of_three_training_seeds() -> None:
    profile = load_profile("paper")
    t = profile.training
    rows = {sweep_row_label("rank_weight", r): r.experiment for r in sweeps(t)["rank_weight"]}
    seeds = {label: {len(s) for s in cell_adapters(t, cell, 8).values()}
             for label, cell in rows.items()}
    assert seeds == {"λ=0": {3}, "λ=0.01": {1}, "λ=0.1": {1}, "λ=0.5": {1}, "λ=1": {1}}


def test_paper_instruct_selects_over_table_5_like_paper() -> None:
    ours, theirs = load_profile("paper_instruct"), load_profile("paper")
    assert ours.training.selection == theirs.training.selection.model_copy(
        update={"rrhf_rank_weights": None})
    assert ours.training.selection.dpo_betas == [0.1, 0.3, 0.5, 2.0, 5.0]
    for _, cell in row_labels(ours.training):
        assert len(configurations(ours.training, cell, 8)) == 3 * 3 * 4 * 5  # η, E, B, β


@pytest.mark.parametrize("name", available_profiles())
def test_no_shipped_profile_trains_an_adapter_equal_to_the_base(name: str) -> None:
    profile = load_profile(name)
    t = profile.training
    cells = [c for _, c in row_labels(t)]
    assert not [a.name for a in trained_adapters(t, cells, profile.sampling.n) if inert(t, a)]


def test_a_no_sft_row_at_lambda_0_is_refused_naming_the_row() -> None:
    with pytest.raises(ProfileError, match=r"training.sweeps.rrhf_variants row variant=no_sft .*"
                                           r"λ = 0"):
        load_profile("paper", {"training": {"sweeps": {"rrhf_variants": {"rank_weight": 0.0}}}})
    with pytest.raises(ProfileError, match=r"main matrix row saturated/rrhf_self_judge"):
        load_profile("demo", {"training": {"rrhf_use_sft": False,
                                           "selection": {"rrhf_rank_weights": [0.0, 0.1]}}})
    with pytest.raises(ProfileError, match=r"training.sweeps.rank_weight row lambda=0 "):
        load_profile("demo", {"training": {"rrhf_use_sft": False, "methods": ["dpo", "sft"],
                                           "sweeps": {"rrhf_variants": None}}})
    # λ = 0 with the SFT term is RAFT (Figure 6's baseline): trainable
    load_profile("demo", {"training": {"selection": {"rrhf_rank_weights": [0.0, 0.1]}}})


def test_a_tasks_train_splits_choose_its_rows_and_cannot_add_one() -> None:
    from saturated_dag.data.questions import can_train_split
    from saturated_dag.experiments import task_cells

    paper = load_profile("paper")
    assert paper.gsm8k.train_splits == ["saturated"] and paper.chain_sum.train_splits is None
    assert {c.split for c in task_cells(paper, "gsm8k")} == {"saturated"}
    assert {c.split for c in task_cells(paper, "chain_sum")} == {
        "saturated", "strict_saturated", "hard"}
    assert not can_train_split(paper, "gsm8k", "hard")
    # a split no row trains adds nothing: GSM8K then trains nothing at all
    hard_only = load_profile("paper", {"training": {"splits": ["hard"]}})
    assert task_cells(hard_only, "gsm8k") == []
