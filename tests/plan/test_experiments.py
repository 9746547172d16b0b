import pytest

from saturated_dag.config import ProfileError
from saturated_dag.experiments import experiment_matrix, main_matrix, sweeps
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.labels import sweep_row_label


def test_paper_matrix_covers_each_scorer_for_dpo_and_rrhf_plus_sft() -> None:
    cells = main_matrix(load_profile("paper").training)
    names = {(c.split, c.name) for c in cells}
    assert len(cells) == 2 * (4 * 2 + 1) + 4  # saturated and strict; hard (Table 7)
    assert ("saturated", "rrhf_entropy") in names and ("strict_saturated", "sft") in names
    rrhf = next(c for c in cells if c.name == "rrhf_self_judge")
    assert rrhf.dataset == ("saturated", "rrhf_groups", "self_judge")


def test_hard_split_uses_correctness_pairs_and_judge_ranked_rrhf() -> None:
    training = load_profile("paper", {"training": {"splits": ["hard"]}}).training
    cells = main_matrix(training)
    assert [c.name for c in cells] == ["dpo_correctness_random", "dpo_correctness_self_judge",
                                       "rrhf_self_judge", "sft"]
    assert cells[0].dataset == ("hard", "correctness_pairs", "random")
    assert not training.hard_pair_control  # the paper's matrix has no shuffled pairs


def test_the_hard_pair_control_adds_the_shuffled_pairs_cell() -> None:
    training = load_profile("paper", {"training": {"splits": ["hard"],
                                                   "hard_pair_control": True}}).training
    cells = main_matrix(training)
    assert [c.name for c in cells][:3] == ["dpo_correctness_random",
                                           "dpo_correctness_self_judge",
                                           "dpo_correctness_shuffled"]
    assert cells[2].dataset == ("hard", "correctness_pairs", "shuffled")
    assert load_profile("study").training.hard_pair_control


def test_raft_is_an_option_on_the_saturated_splits() -> None:
    training = load_profile("paper", {"training": {"methods": ["raft"], "scorers": ["entropy"],
                                                   "splits": ["saturated", "hard"],
                                                   "sweeps": {"rank_weight": None,
                                                              "rrhf_variants": None,
                                                              "dpo_beta": None}}}).training
    cells = experiment_matrix(training)
    assert [(c.split, c.name, c.dataset) for c in cells] == [
        ("saturated", "raft_entropy", ("saturated", "raft_set", "entropy"))]


def test_paper_sweeps_reuse_main_adapters_where_settings_coincide() -> None:
    training = load_profile("paper").training
    table = sweeps(training)
    assert list(table) == ["rank_weight", "rrhf_variants", "dpo_beta"]
    lam = {sweep_row_label("rank_weight", row): row.experiment.name
           for row in table["rank_weight"]}
    # λ = 0.1 is the profile's own rank weight: the main hard σ-RRHF adapter, trained once
    assert lam == {"λ=0": "rrhf_self_judge_lambda0", "λ=0.01": "rrhf_self_judge_lambda0.01",
                   "λ=0.1": "rrhf_self_judge", "λ=0.5": "rrhf_self_judge_lambda0.5",
                   "λ=1": "rrhf_self_judge_lambda1"}
    variants = {sweep_row_label("rrhf_variants", row): row.experiment
                for row in table["rrhf_variants"]}
    assert variants["full"].name == "rrhf_self_judge"
    assert variants["no_sft"].training(training).rrhf_use_sft is False
    assert variants["no_sft"].training(training).rrhf_hinge is True
    beta = table["dpo_beta"]
    assert len(beta) == 15 and beta[0].settings == {"beta": 0.1, "lr": 5e-6}
    # β = 0.1 and η = 1e-5 are the profile's own values: the row still holds both (a cell of
    # its own), instead of being the main cell that selects over every β and η
    own = next(r.experiment for r in beta if r.settings == {"beta": 0.1, "lr": 1e-5})
    assert own.name == "dpo_self_judge_beta0.1_lr1e-05" and own.overrides == ()
    cell = next(r.experiment for r in beta if r.settings == {"beta": 5.0, "lr": 5e-5})
    assert cell.name == "dpo_self_judge_beta5_lr5e-05"
    assert cell.dataset == ("strict_saturated", "dpo_pairs", "self_judge")
    assert cell.training(training).dpo_beta == 5.0
    assert cell.training(training).learning_rate == 5e-5
    cells = experiment_matrix(training)
    assert len(cells) == len({(c.split, c.name) for c in cells}) == 22 + 4 + 3 + 15


def test_a_sweep_on_an_unscored_split_names_the_field() -> None:
    with pytest.raises(ProfileError, match=r"sweeps.rank_weight.split: split 'hard'"):
        load_profile("demo", {"scoring": {"all_completion_splits": []},
                              "training": {"splits": ["saturated"],
                                           "sweeps": {"rank_weight": {"split": "hard"}}}})
    with pytest.raises(ProfileError, match=r"rank weights must be >= 0"):
        load_profile("paper", {"training": {"sweeps": {"rank_weight": {"values": [-1]}}}})


def test_a_configurations_settings_are_validated_once_and_exactly() -> None:
    """The plan asks for one configuration's settings once per adapter and partition key; each
    distinct (settings, update) pair is validated once, and a pair that differs only in a
    value's type (``True`` against ``1``) is validated on its own."""
    from pydantic import ValidationError

    from saturated_dag.experiments import _validated

    base = load_profile("demo").training
    first = _validated(base, {"learning_rate": 3e-4})
    assert _validated(base, {"learning_rate": 3e-4}) is first
    assert first.learning_rate == 3e-4 and first.model_dump() == {
        **base.model_dump(), "learning_rate": 3e-4}
    assert _validated(base, {"epochs": 1}).epochs == 1
    with pytest.raises(ValidationError, match="epochs"):
        _validated(base, {"epochs": True})  # no boolean for a number, as without the cache
    for _ in range(2):  # a bad update is refused every time, never remembered as good
        with pytest.raises(ValidationError):
            _validated(base, {"epochs": 0})
