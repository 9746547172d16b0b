from saturated_dag.config import load_profile
from saturated_dag.experiments import experiment_matrix


def test_paper_matrix_covers_each_scorer_for_dpo_and_rrhf_plus_sft() -> None:
    cells = experiment_matrix(load_profile("paper").training)
    names = {(c.split, c.name) for c in cells}
    assert len(cells) == 2 * (4 * 2 + 1)
    assert ("saturated", "rrhf_entropy") in names and ("strict_saturated", "sft") in names
    rrhf = next(c for c in cells if c.name == "rrhf_self_judge")
    assert rrhf.dataset == ("saturated", "rrhf_groups", "self_judge")


def test_hard_split_uses_correctness_pairs() -> None:
    training = load_profile("paper", {"training": {"splits": ["hard"]}}).training
    names = [c.name for c in experiment_matrix(training)]
    assert names == ["dpo_correctness_random", "dpo_correctness_self_judge", "sft"]


def test_raft_is_an_option_on_the_saturated_splits() -> None:
    training = load_profile("paper", {"training": {"methods": ["raft"], "scorers": ["entropy"],
                                                   "splits": ["saturated", "hard"]}}).training
    cells = experiment_matrix(training)
    assert [(c.split, c.name, c.dataset) for c in cells] == [
        ("saturated", "raft_entropy", ("saturated", "raft_set", "entropy"))]
