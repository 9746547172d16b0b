from pathlib import Path

import pytest

from saturated_dag.config import ProfileError
from saturated_dag.profiles import available_profiles, load_profile
from saturated_dag.tasks.chain_sum import grid_of


def test_shipped_profiles_are_valid() -> None:
    assert {"demo", "paper"} <= set(available_profiles())
    paper = load_profile("paper")
    assert paper.policy.model == "Qwen/Qwen3-1.7B-Base" and paper.policy.backend == "vllm"
    s = paper.sampling
    assert (s.n, s.temperature, s.top_p, s.max_new_tokens) == (8, 0.6, 0.95, 2048)
    assert len(grid_of(paper.chain_sum.grid)) == 25
    assert len(grid_of(paper.chain_sum.strict_grid)) == 15
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


# Issue 15, item 3: validation refuses what cannot be meant.

@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"sampling": {"temperature": float("inf")}}, "sampling.temperature"),
        ({"sampling": {"temperature": float("nan")}}, "sampling.temperature"),
        ({"training": {"learning_rate": float("inf")}}, "training.learning_rate"),
        ({"training": {"dpo_beta": float("inf")}}, "training.dpo_beta"),
        ({"training": {"rrhf_rank_weight": float("nan")}}, "training.rrhf_rank_weight"),
        ({"scoring": {"epsilon": float("inf")}}, "scoring.epsilon"),
        ({"training": {"sweeps": {"rank_weight": {"values": [0.0, float("inf")]}}}},
         "training.sweeps.rank_weight.values.1"),
        ({"training": {"sweeps": {"dpo_beta": {"betas": [float("nan")]}}}},
         "training.sweeps.dpo_beta.betas.0"),
    ],
)
def test_non_finite_numbers_are_refused(override: dict, field: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("demo", override)
    assert f"{field}: Input should be a finite number" in str(err.value)


def test_yaml_non_finite_spelling_is_refused(tmp_path: Path) -> None:
    """YAML's own ``.inf``/``.nan`` spelling, as a user would write it in a profile file."""
    path = tmp_path / "inf.yaml"
    path.write_text("name: inf\ntasks: [gsm8k]\npolicy: {model: ./m}\n"
                    "sampling: {temperature: .inf}\ntraining: {learning_rate: .nan}\n")
    with pytest.raises(ProfileError) as err:
        load_profile(str(path))
    assert "sampling.temperature: Input should be a finite number" in str(err.value)
    assert "training.learning_rate: Input should be a finite number" in str(err.value)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"sampling": {"n": True}}, "sampling.n"),
        ({"sampling": {"seed": False}}, "sampling.seed"),
        ({"sampling": {"temperature": True}}, "sampling.temperature"),
        ({"training": {"epochs": True}}, "training.epochs"),
        ({"policy": {"vllm": {"max_lora_rank": True}}}, "policy.vllm.max_lora_rank"),
        ({"chain_sum": {"grid": {"terms": [True, 3], "digits": [1, 1]}}}, "terms"),
        ({"training": {"sweeps": {"rank_weight": {"values": [0.0, True]}}}},
         "training.sweeps.rank_weight.values"),
        ({"chain_sum": {"eval_limit": True}}, "chain_sum.eval_limit"),
    ],
)
def test_boolean_is_not_a_number(override: dict, field: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("demo", override)
    assert field in str(err.value) and "boolean" in str(err.value)


def test_booleans_and_numbers_still_validate_where_they_belong(tmp_path: Path) -> None:
    """Booleans stay booleans; YAML ints are accepted for float fields (``learning_rate: 1``)."""
    profile = load_profile("demo", {"policy": {"enable_thinking": False},
                                    "training": {"isolate": False, "learning_rate": 1,
                                                 "dpo_beta": 2},
                                    "sampling": {"temperature": 0}})
    assert profile.policy.enable_thinking is False and profile.training.isolate is False
    assert profile.training.learning_rate == 1.0 and profile.training.dpo_beta == 2.0
    assert profile.sampling.temperature == 0.0
    path = tmp_path / "ints.yaml"
    path.write_text("name: ints\ntasks: [gsm8k]\npolicy: {model: ./m}\n"
                    "training: {learning_rate: 1, sweeps: {rank_weight: {values: [0, 1]}}}\n")
    loaded = load_profile(str(path))
    assert loaded.training.learning_rate == 1.0
    assert loaded.training.sweeps.rank_weight is not None
    assert loaded.training.sweeps.rank_weight.values == [0.0, 1.0]


@pytest.mark.parametrize("field", ["splits", "methods"])
def test_empty_training_lists_are_refused(field: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("demo", {"training": {field: []}})
    assert f"training.{field}: List should have at least 1 item" in str(err.value)


def test_no_scorers_is_refused_only_when_a_method_needs_one() -> None:
    with pytest.raises(ProfileError, match=r"scorers is empty, but methods \['dpo', 'rrhf'\]"):
        load_profile("demo", {"training": {"scorers": []}})
    sft_only = load_profile("demo", {"training": {"scorers": [], "methods": ["sft"]}})
    assert sft_only.training.scorers == []


def _nested(path: tuple[str, ...], leaf: dict) -> dict:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


@pytest.mark.parametrize("section", [("policy",), ("judges", "strong")])
@pytest.mark.parametrize("value", [True, "true", 1])
def test_override_cannot_switch_on_remote_code(section: tuple[str, ...], value: object) -> None:
    """Any value pydantic would read as true (``"true"``, ``1``) is refused alike."""
    with pytest.raises(ProfileError) as err:
        load_profile("demo", _nested(section, {"trust_remote_code": value}))
    message = str(err.value)
    assert f"{'.'.join(section)}.trust_remote_code" in message
    assert "only the profile file" in message and "demo.yaml" in message


def test_remote_code_granted_by_the_file_holds_for_its_model_only(tmp_path: Path) -> None:
    path = tmp_path / "remote.yaml"
    path.write_text("name: remote\ntasks: [gsm8k]\n"
                    "policy: {model: org/custom, trust_remote_code: true}\n")
    assert load_profile(str(path)).policy.trust_remote_code is True
    # overrides may keep it, restate it, or switch it off
    kept = load_profile(str(path), {"policy": {"trust_remote_code": True, "batch_size": 8}})
    assert kept.policy.trust_remote_code is True
    assert load_profile(str(path), {"policy": {"trust_remote_code": False,
                                               "model": "org/other"}}).policy.model == "org/other"
    with pytest.raises(ProfileError) as err:
        load_profile(str(path), {"policy": {"model": "org/other"}})
    assert "policy.model" in str(err.value) and "org/custom" in str(err.value)


# Issue 33, item 4: experiment tracking is opt-in, and its store sits beside the outputs.

@pytest.mark.parametrize("name", available_profiles())
def test_tracking_is_off_by_default(name: str, tmp_path: Path) -> None:
    tracking = load_profile(name).tracking
    assert tracking.mlflow is False and tracking.report_to == "none"
    assert tracking.tracking_uri is None and tracking.experiment == "saturated-dag"
    assert tracking.uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_tracking_switched_on(tmp_path: Path) -> None:
    on = load_profile("demo", {"tracking": {"mlflow": True}}).tracking
    assert on.report_to == "mlflow"
    relative = on.uri("out")  # made absolute: the trainer's child and `mlflow ui` agree
    assert relative == f"sqlite:///{Path('out').resolve()}/mlflow.db"
    given = load_profile("demo", {"tracking": {"mlflow": True,
                                               "tracking_uri": "http://127.0.0.1:5000"}})
    assert given.tracking.uri(tmp_path) == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    ("override", "field"),
    [({"tracking": {"mlflow": "maybe"}}, "tracking.mlflow"),
     ({"tracking": {"tracking_uri": ""}}, "tracking.tracking_uri"),
     ({"tracking": {"experiment": ""}}, "tracking.experiment"),
     ({"tracking": {"mlfow": True}}, "tracking.mlfow")],
)
def test_bad_tracking_setting_is_named(override: dict, field: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("demo", override)
    assert f"{field}:" in str(err.value)
