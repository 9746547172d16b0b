import itertools
import json
from pathlib import Path

import pytest

from saturated_dag.config import load_profile
from saturated_dag.tasks import chain_sum, eval_questions, gsm8k, training_questions
from saturated_dag.tasks.prompts import render_prompt
from tests.conftest import GSM8K_DIR
from tests.tiny_models import build_tokenizer


def test_paper_presets() -> None:
    d = chain_sum.PRESETS["D"]
    assert len(d) == 25 and min(d) == (6, 6) and max(d) == (10, 10)
    dp = chain_sum.PRESETS["D_prime"]
    assert len(dp) == 15 and (6, 6) not in dp and (3, 3) in dp and (6, 5) in dp


def test_seeds_are_spaced_wider_than_any_pool() -> None:
    seeds = sorted(chain_sum.cell_seed(0, pool, cell)
                   for pool in chain_sum.POOL_INDEX for cell in chain_sum.PRESETS["D"])
    gaps = [b - a for a, b in itertools.pairwise(seeds)]
    assert min(gaps) >= chain_sum.SEED_SPACING


def test_reasoning_gym_seed_shift_property_holds() -> None:
    # The reason for the spacing: item i under seed s equals item i-1 under seed s+1.
    from reasoning_gym.arithmetic.chain_sum import ChainSumConfig, ChainSumDataset

    def item(seed: int, idx: int) -> str:
        config = ChainSumConfig(min_terms=3, max_terms=3, min_digits=2, max_digits=2,
                                seed=seed, size=10)
        return ChainSumDataset(config)[idx]["metadata"]["expression"]

    assert item(100, 5) == item(101, 4)


def test_cells_have_requested_shape_and_are_deduplicated() -> None:
    qs = chain_sum.build_pool("D", [(2, 1), (3, 2)], per_cell=30, base_seed=7)
    assert len(qs) == 60
    for q in qs:
        terms = len(q.meta["expression"].split()) // 2 + 1
        assert terms == q.meta["terms"] and q.cell == f"{q.meta['terms']}x{q.meta['digits']}"
        assert eval(q.meta["expression"]) == int(q.gold)  # left-to-right + and - only
    assert len({q.meta["expression"] for q in qs}) == 60
    assert len({q.question_id for q in qs}) == 60


def test_eval_set_disjoint_from_training_pools() -> None:
    profile = load_profile("demo", {"chain_sum": {"questions_per_cell": 30,
                                                  "eval_questions_per_cell": 30}})
    train = chain_sum.expressions(training_questions(profile, "chain_sum"))
    evals = eval_questions(profile, "chain_sum")
    assert evals and not (chain_sum.expressions(evals) & train)


def test_small_cell_exhaustion_is_a_clear_error() -> None:
    # 2-term 1-digit sums have 200 distinct expressions.
    with pytest.raises(ValueError, match="distinct unused expressions"):
        chain_sum.build_pool("D", [(2, 1)], per_cell=250, base_seed=0)


def test_empty_grid_is_an_error() -> None:
    with pytest.raises(ValueError, match="grid is empty"):
        chain_sum.grid_cells((3, 3), (2, 2), exclude=[(3, 2)])


def test_unknown_task_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown task 'chainsum'"):
        training_questions(load_profile("demo"), "chainsum")


def test_gsm8k_local_folder() -> None:
    train = gsm8k.load_split(str(GSM8K_DIR), "train")
    test = gsm8k.load_split(str(GSM8K_DIR), "test")
    assert (len(train), len(test)) == (7473, 1319)
    assert all(float(q.gold) == int(float(q.gold)) and "," not in q.gold for q in train + test)
    assert train[0].gold == "72" and train[0].pool == "D" and test[0].pool == "eval"


def test_gsm8k_commas_removed(tmp_path: Path) -> None:
    row = {"question": "How many?", "answer": "Work.\n#### 1,234"}
    (tmp_path / "train.jsonl").write_text(json.dumps(row) + "\n")
    assert gsm8k.load_split(str(tmp_path), "train")[0].gold == "1234"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"question": "Q?"}), "missing or empty field 'answer'"),
        (json.dumps({"question": "Q?", "answer": "no marker"}), "no '####'"),
        (json.dumps({"question": "Q?", "answer": "#### twelve"}), "is not a number"),
    ],
)
def test_gsm8k_malformed_row_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps({"question": "Q?", "answer": "#### 3"})
    (tmp_path / "train.jsonl").write_text(f"{good}\n{line}\n")
    with pytest.raises(gsm8k.DatasetFormatError, match=message) as err:
        gsm8k.load_split(str(tmp_path), "train")
    assert f"{tmp_path / 'train.jsonl'}:2" in str(err.value)


def test_gsm8k_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"test\.jsonl"):
        gsm8k.load_split(str(tmp_path), "test")
    with pytest.raises(FileNotFoundError, match="GSM8K folder not found"):
        gsm8k.load_split(str(tmp_path / "nope"), "test")


def test_prompt_uses_chat_template_only_when_present() -> None:
    text = chain_sum.build_pool("D", [(2, 1)], 1, 0)[0].prompt_text
    assert text.startswith("Compute the following step by step:\n")
    assert text.endswith("return the final answer in \\boxed{} tags, for example \\boxed{42}.")
    templated = render_prompt(build_tokenizer(chat_template=True), text)
    assert templated.startswith("<|user|>") and templated.endswith("<|assistant|>")
    plain = build_tokenizer(chat_template=False)
    assert render_prompt(plain, text) == text
    with pytest.raises(ValueError, match="no chat template"):
        render_prompt(plain, text, "always")


def test_validation_set_disjoint_from_training_and_eval() -> None:
    from saturated_dag.tasks import validation_questions

    profile = load_profile("demo")
    val = chain_sum.expressions(validation_questions(profile, "chain_sum"))
    assert val
    assert not val & chain_sum.expressions(training_questions(profile, "chain_sum"))
    assert not val & chain_sum.expressions(eval_questions(profile, "chain_sum"))
    g = load_profile("demo", {"gsm8k": {"train_limit": None},
                              "training": {"gsm8k_validation_questions": 50}})
    train_ids = {q.question_id for q in training_questions(g, "gsm8k")}
    val_ids = {q.question_id for q in validation_questions(g, "gsm8k")}
    assert len(val_ids) == 50 and len(train_ids) == 7473 - 50 and not train_ids & val_ids
