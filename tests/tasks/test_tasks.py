import itertools
import json
from pathlib import Path

import pytest

from saturated_dag.data.questions import eval_questions, training_questions
from saturated_dag.profiles import load_profile
from saturated_dag.tasks import chain_sum, gsm8k
from saturated_dag.tasks.prompts import render_prompt
from tests.conftest import GSM8K_DIR, REPO_ROOT
from tests.tiny_models import build_tokenizer


def test_paper_presets() -> None:
    d = chain_sum.PRESETS["D"]
    assert len(d) == 25 and min(d) == (6, 6) and max(d) == (10, 10)
    dp = chain_sum.PRESETS["D_prime"]
    assert len(dp) == 15 and (6, 6) not in dp and (3, 3) in dp and (6, 5) in dp


def test_seeds_are_spaced_wider_than_any_pool() -> None:
    seeds = sorted(chain_sum.point_seed(0, pool, point)
                   for pool in chain_sum.POOL_INDEX for point in chain_sum.PRESETS["D"])
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


def test_grid_points_have_requested_shape_and_are_deduplicated() -> None:
    qs = chain_sum.build_pool("D", [(2, 1), (3, 2)], per_point=30, base_seed=7)
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


def test_small_grid_point_exhaustion_is_a_clear_error() -> None:
    # 2-term 1-digit sums have 200 distinct expressions.
    with pytest.raises(ValueError, match="distinct unused expressions"):
        chain_sum.build_pool("D", [(2, 1)], per_point=250, base_seed=0)


def test_empty_grid_is_an_error() -> None:
    with pytest.raises(ValueError, match="grid is empty"):
        chain_sum.grid_points((3, 3), (2, 2), exclude=[(3, 2)])


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


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ("1e3", "not a number in plain decimal form"),  # loaded; \\boxed{1000} was then wrong
        ("1_000", "not a number in plain decimal form"),
        ("nan", "not a number in plain decimal form"),
        ("inf", "not a number in plain decimal form"),
        ("-Infinity", "not a number in plain decimal form"),
        ("\uff11\uff10\uff10\uff10", "not a number in plain decimal form"),  # full-width 1000
        ("1 000", "not a number in plain decimal form"),
        ("+5", "not a number in plain decimal form"),
        (".5", "not a number in plain decimal form"),
        ("1" * 250, "answers over 200 characters wrong"),
    ],
)
def test_gsm8k_gold_the_checker_cannot_match_names_file_and_line(
    tmp_path: Path, gold: str, message: str
) -> None:
    """Issue 15: such golds loaded and then scored right answers wrong, or crashed the checker."""
    good = json.dumps({"question": "Q?", "answer": "#### 3"})
    bad = json.dumps({"question": "Q?", "answer": f"Work.\n#### {gold}"})
    (tmp_path / "train.jsonl").write_text(f"{good}\n{bad}\n")
    with pytest.raises(gsm8k.DatasetFormatError, match=message) as err:
        gsm8k.load_split(str(tmp_path), "train")
    assert f"{tmp_path / 'train.jsonl'}:2" in str(err.value)
    assert repr(gold) in str(err.value) or "characters" in str(err.value)


@pytest.mark.parametrize(
    ("written", "gold", "boxed"),
    [("1,000", "1000", "1000"), ("-5", "-5", "-5"), ("0.5", "0.5", "0.5"),
     ("12.50", "12.50", "12.5"), ("007", "007", "7"), ("-0", "-0", "0")],
)
def test_gsm8k_accepted_golds_match_a_correct_boxed_answer_in_both_checks(
    tmp_path: Path, written: str, gold: str, boxed: str
) -> None:
    from saturated_dag.tasks.verification import ANSWER_CHECKS, verify_answer

    row = {"question": "How many?", "answer": f"Work.\n#### {written}"}
    (tmp_path / "train.jsonl").write_text(json.dumps(row) + "\n")
    assert gsm8k.load_split(str(tmp_path), "train")[0].gold == gold
    for mode in ANSWER_CHECKS:
        assert verify_answer(f"So \\boxed{{{boxed}}}.", gold, mode).correct, mode


def test_unmatched_answer_checks_names_the_modes() -> None:
    from saturated_dag.tasks.verification import READING_CHECKS, unmatched_answer_checks

    assert unmatched_answer_checks("1000", "1000") == []
    assert unmatched_answer_checks("1e3", "1000") == list(READING_CHECKS)
    assert unmatched_answer_checks("\uff11\uff10\uff10\uff10", "1000") == list(READING_CHECKS)


def test_gsm8k_every_real_gold_matches_its_boxed_value_in_both_checks() -> None:
    """Both real files load under the stricter gold check, and each gold is matchable."""
    from saturated_dag.tasks.verification import ANSWER_CHECKS, verify_answer

    golds = {q.gold for split in ("train", "test")
             for q in gsm8k.load_split(str(GSM8K_DIR), split)}
    assert len(golds) > 900
    for gold in golds:
        for mode in ANSWER_CHECKS:
            assert verify_answer(f"\\boxed{{{int(gold)}}}", gold, mode).correct, (gold, mode)


def test_gsm8k_ids_are_line_numbers_blank_lines_included(tmp_path: Path) -> None:
    """Ids follow the file's lines, so a blank line never renumbers the rows above it."""
    rows = [json.dumps({"question": f"Q{i}?", "answer": f"#### {i}"}) for i in range(3)]
    path = tmp_path / "train.jsonl"
    path.write_text(f"{rows[0]}\n\n{rows[1]}\n   \n{rows[2]}\n")
    ids = [q.question_id for q in gsm8k.load_split(str(tmp_path), "train")]
    assert ids == ["gsm8k/train/0", "gsm8k/train/2", "gsm8k/train/4"]
    path.write_text(f"{rows[0]}\n\n{rows[1]}\n\n\n{rows[2]}\n\n")
    moved = {q.problem: q.question_id for q in gsm8k.load_split(str(tmp_path), "train")}
    assert (moved["Q0?"], moved["Q1?"]) == ("gsm8k/train/0", "gsm8k/train/2")
    assert [q.question_id for q in gsm8k.load_split(str(tmp_path), "train", limit=2)] == ids[:2]


def test_gsm8k_real_ids_are_line_indices() -> None:
    """The real files have no blank lines: line-based ids are the row indices they always were."""
    for split, count in (("train", 7473), ("test", 1319)):
        lines = (GSM8K_DIR / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == count and all(line.strip() for line in lines)
        ids = [q.question_id for q in gsm8k.load_split(str(GSM8K_DIR), split)]
        assert ids == [f"gsm8k/{split}/{i}" for i in range(count)]


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
    from saturated_dag.data.questions import validation_questions

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


# --- the paper's fixed chain-sum eval set (chain_sum.eval_source) ---------------------------

def _rg_row(expression: str, answer: int, **extra: object) -> dict:
    """A row as reasoning-gym's chain_sum writes it (question/answer/metadata)."""
    terms = expression.split()[::2]
    return {"question": f"State the final answer to the following arithmetic problem: "
                        f"{expression} =", "answer": str(answer),
            "metadata": {"source_dataset": "chain_sum", "num_terms": len(terms),
                         "num_digits": max(len(t.lstrip("-")) for t in terms),
                         "expression": expression}, **extra}


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_eval_set_from_jsonl_reads_reasoning_gym_and_paper_rows(tmp_path: Path) -> None:
    meta_as_text = _rg_row("12 - 30 + 4", -14)
    meta_as_text["metadata"] = json.dumps(meta_as_text["metadata"])
    rows = [
        _rg_row("877572 + 388389 - 356787", 909174),
        meta_as_text,
        # the paper's eval.py reads `question` and `ground_truth` (text after a ####)
        {"question": "Compute the following step by step: 381 - 706 - 602 + 383 =",
         "ground_truth": "#### -544"},
        {"problem": "What is 5 - -3 + 10?", "gold": 18},  # negation, no metadata
    ]
    path = _write_jsonl(tmp_path / "eval.jsonl", rows)
    questions = chain_sum.load_eval_set(str(path))
    assert [q.gold for q in questions] == ["909174", "-14", "-544", "18"]
    assert [q.cell for q in questions] == ["3x6", "3x2", "4x3", "3x2"]
    assert [q.meta["terms"] for q in questions] == [3, 3, 4, 3]
    assert questions[3].meta["expression"] == "5 - -3 + 10"
    assert len({q.question_id for q in questions}) == 4
    assert all(q.pool == "eval" and q.task == "chain_sum" for q in questions)
    # the prompt is the pools' (App. A.3), rebuilt from the expression; the source text is kept
    pool_prompt = chain_sum.build_pool("D", [(2, 1)], 1, 0)[0].prompt_text
    assert questions[2].prompt_text.split("\n", 1)[0] == pool_prompt.split("\n", 1)[0]
    assert questions[2].problem == "Compute the following step by step:\n381 - 706 - 602 + 383 ="
    assert questions[0].meta["source_question"].startswith("State the final answer")


def test_eval_set_from_a_datasets_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from datasets import Dataset, DatasetDict

    rows = [_rg_row("1 + 2", 3), _rg_row("40 - 2 + 7", 45)]
    DatasetDict({"train": Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    questions = chain_sum.load_eval_set(str(tmp_path / "saved"))
    assert [q.gold for q in questions] == ["3", "45"] and questions[1].cell == "3x2"
    # a folder of data files (a clone of the hub repository): load_dataset(folder)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")
    (tmp_path / "files").mkdir()
    _write_jsonl(tmp_path / "files" / "train.jsonl", rows)
    assert [q.gold for q in chain_sum.load_eval_set(str(tmp_path / "files"))] == ["3", "45"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"question": "1 + 2 ="}), "missing column for the answer"),
        (json.dumps({"answer": "3"}), "missing column for the question"),
        (json.dumps({"question": "What is two plus one?", "answer": "3"}), "no chain-sum"),
        (json.dumps({"question": "1 + 2 =", "answer": "4"}), "answer 4 is not the value 3"),
        (json.dumps({"question": "1 + 2 =", "answer": "three"}), "is not an integer"),
        (json.dumps({**_rg_row("1 + 2", 3), "metadata": "{oops"}), "'metadata' is not JSON"),
    ],
)
def test_eval_set_malformed_row_names_file_and_line(tmp_path: Path, line: str,
                                                    message: str) -> None:
    path = _write_jsonl(tmp_path / "eval.jsonl", [_rg_row("1 + 2", 3), line])
    with pytest.raises(gsm8k.DatasetFormatError, match=message) as err:
        chain_sum.load_eval_set(str(path))
    assert f"{path}:2" in str(err.value)


def test_eval_set_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"eval set not found: .*absent\.jsonl"):
        chain_sum.load_eval_set(str(tmp_path / "absent.jsonl"))


def test_eval_set_hub_id_offline_says_how_to_provide_a_copy(tmp_path: Path) -> None:
    """HF_HUB_OFFLINE=1 and an empty cache: fails at once, naming the dataset and the fix."""
    import os
    import subprocess
    import sys

    code = ("from saturated_dag.tasks import chain_sum\n"
            "chain_sum.load_eval_set('hannoh/chainsum_eval')\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode != 0
    assert "EvalSourceError: chain_sum eval set 'hannoh/chainsum_eval'" in done.stderr
    assert "offline (HF_HUB_OFFLINE=1)" in done.stderr
    assert ('datasets.load_dataset("hannoh/chainsum_eval", split="train")'
            '.to_json("chainsum_eval.jsonl")') in done.stderr
    assert "set chain_sum.eval_source to its path" in done.stderr


def test_eval_set_hub_unreachable_fails_before_the_library_retries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Online mode without network: no call into load_dataset (its retries take ~25 s)."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(chain_sum, "_hub_reachable", lambda timeout=5.0: False)

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_dataset must not be called without network")

    monkeypatch.setattr(datasets, "load_dataset", never)
    with pytest.raises(chain_sum.EvalSourceError, match=r"(?s)not reachable .*to_json"):
        chain_sum.load_eval_set("hannoh/chainsum_eval")


def test_fixed_eval_set_keeps_training_and_validation_pools_disjoint(tmp_path: Path) -> None:
    from saturated_dag.data.questions import validation_questions

    demo = load_profile("demo")
    train = training_questions(demo, "chain_sum")
    val = validation_questions(demo, "chain_sum")
    # an eval set that collides with the generated pools: two D, one D' and one validation item
    taken = [train[0], train[40], train[-1], val[0]]
    path = _write_jsonl(tmp_path / "eval.jsonl",
                        [_rg_row(q.meta["expression"], int(q.gold)) for q in taken])
    fixed = load_profile("demo", {"chain_sum": {"eval_source": str(path)}})
    evals = eval_questions(fixed, "chain_sum")
    assert [q.meta["expression"] for q in evals] == [q.meta["expression"] for q in taken]
    fixed_train = training_questions(fixed, "chain_sum")
    fixed_val = validation_questions(fixed, "chain_sum")
    assert not chain_sum.expressions(evals) & chain_sum.expressions(fixed_train)
    assert not chain_sum.expressions(evals) & chain_sum.expressions(fixed_val)
    assert not chain_sum.expressions(fixed_train) & chain_sum.expressions(fixed_val)
    assert len(fixed_train) == len(train) and len(fixed_val) == len(val)  # replaced, not lost


def test_generated_pools_unchanged_without_eval_source() -> None:
    """The demo's pools are the plain draws of their seeds (no exclusion of the eval set)."""
    from saturated_dag.tasks.chain_sum import grid_of

    demo = load_profile("demo")
    cfg = demo.chain_sum
    expected = chain_sum.build_pool("D", grid_of(cfg.grid), cfg.questions_per_cell, cfg.seed)
    expected += chain_sum.build_pool("D_prime", grid_of(cfg.strict_grid),
                                     cfg.strict_questions_per_cell, cfg.seed)
    assert training_questions(demo, "chain_sum") == expected


def test_eval_set_names() -> None:
    from saturated_dag.data.questions import eval_set_name

    demo = load_profile("demo")
    assert eval_set_name(demo, "chain_sum", 96) == (
        "generated: 16 per grid point over terms 3-5 x digits 1-2 (96 questions, seed 0)")
    paper = load_profile("paper")
    assert eval_set_name(paper, "chain_sum", 200) == "hannoh/chainsum_eval (200 questions)"
    assert eval_set_name(paper, "gsm8k", 1319) == (
        "GSM8K test (1319 questions, ../shared/data/gsm8k)")
    assert eval_set_name(demo, "gsm8k", 16) == (
        "GSM8K test, the first 16 (16 questions, ../shared/data/gsm8k)")


def test_eval_limit_takes_the_first_rows_and_refuses_more_than_there_are(tmp_path: Path) -> None:
    """The paper's eval.py evaluates the first 200 rows of hannoh/chainsum_eval."""
    rows = [_rg_row(f"{a} + {a + 1}", 2 * a + 1) for a in range(10, 15)]
    path = _write_jsonl(tmp_path / "eval.jsonl", rows)
    limited = load_profile("demo", {"chain_sum": {"eval_source": str(path), "eval_limit": 3}})
    evals = eval_questions(limited, "chain_sum")
    assert [q.meta["expression"] for q in evals] == ["10 + 11", "11 + 12", "12 + 13"]
    too_many = load_profile("demo", {"chain_sum": {"eval_source": str(path), "eval_limit": 9}})
    with pytest.raises(ValueError, match=r"eval_limit is 9 but .* has only 5 rows"):
        eval_questions(too_many, "chain_sum")
    assert load_profile("paper").chain_sum.eval_limit == 200


def test_question_sets_are_built_once_per_profile_and_source_file(
        tmp_path, monkeypatch) -> None:
    """The adapters of a profile share one build of its question sets (the paper profile's
    pool took seconds per adapter); another profile, or an edited source file, builds anew."""
    import shutil

    from saturated_dag.data import questions as registry
    from saturated_dag.profiles import load_profile
    from saturated_dag.tasks import chain_sum as chain_sum_module
    from saturated_dag.tasks import gsm8k as gsm8k_module

    builds = []
    real = chain_sum_module.build_pool
    monkeypatch.setattr(chain_sum_module, "build_pool",
                        lambda *a, **k: builds.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(registry, "_QUESTIONS", {})
    demo = load_profile("demo")
    first = registry.validation_questions(demo, "chain_sum")
    count = len(builds)
    assert count > 0
    again = registry.validation_questions(demo, "chain_sum")
    assert again == first and again is not first and len(builds) == count
    registry.training_questions(demo, "chain_sum")
    assert len(builds) == count  # built on the way to the validation set
    other = load_profile("demo", {"chain_sum": {"seed": 1}})
    assert registry.validation_questions(other, "chain_sum") != first
    assert len(builds) > count

    source = tmp_path / "gsm8k"
    shutil.copytree(GSM8K_DIR, source)
    reads = []
    real_read = gsm8k_module._read_jsonl
    monkeypatch.setattr(gsm8k_module, "_read_jsonl",
                        lambda *a, **k: reads.append(a[1]) or real_read(*a, **k))
    profile = load_profile("demo", {"tasks": ["gsm8k"], "gsm8k": {"source": str(source)}})
    before = registry.eval_questions(profile, "gsm8k")
    registry.eval_questions(profile, "gsm8k")
    assert reads == ["test"]
    test_file = source / "test.jsonl"
    first_row, *rest = test_file.read_text().splitlines(keepends=True)
    row = json.loads(first_row)
    row["question"] = "An edited question: " + row["question"]
    test_file.write_text(json.dumps(row) + "\n" + "".join(rest))
    after = registry.eval_questions(profile, "gsm8k")
    assert reads == ["test", "test"] and "An edited question" in after[0].problem
    assert after[1:] == before[1:]
