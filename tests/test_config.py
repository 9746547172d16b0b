from pathlib import Path

import pytest

from saturated_dag.config import ProfileError, available_profiles, grid_cells, load_profile


def test_shipped_profiles_are_valid() -> None:
    assert {"demo", "paper"} <= set(available_profiles())
    paper = load_profile("paper")
    assert paper.policy.model == "Qwen/Qwen3-1.7B-Base" and paper.policy.backend == "vllm"
    s = paper.sampling
    assert (s.n, s.temperature, s.top_p, s.max_new_tokens) == (8, 0.6, 0.95, 2048)
    assert len(grid_cells(paper.chain_sum.grid)) == 25
    assert len(grid_cells(paper.chain_sum.strict_grid)) == 15
    assert paper.chain_sum.eval_questions_per_cell * 25 == 200
    assert load_profile("demo").policy.backend == "transformers"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"policy": {"backend": "tf"}}, "policy.backend"),
        ({"sampling": {"temperature": -1}}, "sampling.temperature"),
        ({"sampling": {"top_p": 1.5}}, "sampling.top_p"),
        ({"tasks": ["chain_sum", "mmlu"]}, "tasks.1"),
        ({"tasks": []}, "tasks"),
        ({"chain_sum": {"grid": {"terms": [5, 4], "digits": [1, 1]}}}, "chain_sum"),
        ({"chain_sum": {"grid": "E"}}, "chain_sum.grid"),
        ({"chain_sum": {"questions_per_cell": 0}}, "chain_sum.questions_per_cell"),
        ({"partitions": {"hard_max_pass": 1.0}}, "partitions.hard_max_pass"),
        ({"sampling": {"temprature": 0.5}}, "sampling.temprature"),
    ],
)
def test_bad_field_is_named(override: dict, field: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("demo", override)
    assert field in str(err.value)


def test_empty_grid_message_names_the_grid() -> None:
    with pytest.raises(ProfileError, match="grid is empty"):
        load_profile("demo", {"chain_sum": {"strict_grid": {"terms": [2, 2], "digits": [1, 1],
                                                             "exclude": [[2, 1]]}}})


def test_profile_from_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntasks: [gsm8k]\npolicy: {model: ./m}\n")
    assert load_profile(str(path)).tasks == ["gsm8k"]
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        load_profile("nope")
    path.write_text("- a list\n")
    with pytest.raises(ProfileError, match="must be a YAML mapping"):
        load_profile(str(path))
