import math

import pandas as pd
import pytest

from saturated_dag import preference_data as pdata


def _pool(correct: dict[str, list[bool]]) -> pd.DataFrame:
    rows = []
    for qid, flags in correct.items():
        for i, ok in enumerate(flags):
            rows.append({"question_id": qid, "sample_index": i, "prompt": f"P {qid}",
                         "completion": f"{qid} completion {i}", "correct": ok})
    return pd.DataFrame(rows)


def _scores(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"question_id": q, "sample_index": i, "score": s}
                         for q, scores in values.items() for i, s in enumerate(scores)])


POOL = _pool({"a": [True] * 4, "b": [True] * 3, "c": [True] * 2, "d": [True]})


def test_dpo_pairs_argmax_argmin_and_skips() -> None:
    scores = _scores({"a": [0.2, 0.9, 0.1, 0.5], "b": [0.4, 0.4, 0.4], "c": [1.0, 0.0],
                      "d": [0.7]})
    pairs, stats = pdata.dpo_pairs(POOL, scores, seed=3)
    assert list(pairs["question_id"]) == ["a", "c"]
    a = pairs.iloc[0]
    assert (a["chosen_sample"], a["rejected_sample"]) == (1, 2)
    assert (pairs["chosen"] != pairs["rejected"]).all()
    assert stats.skipped == {"all_scores_equal": 1, "fewer_than_two_completions": 1}
    assert stats.as_metadata()["tie_break_seed"] == 3


def test_dpo_ties_broken_at_random_but_reproducibly() -> None:
    scores = _scores({"a": [1.0, 1.0, 1.0, 0.0]})
    picks = {int(pdata.dpo_pairs(POOL, scores, seed=s)[0].iloc[0]["chosen_sample"])
             for s in range(30)}
    assert picks == {0, 1, 2}
    again = [pdata.dpo_pairs(POOL, scores, seed=7)[0].iloc[0]["chosen_sample"] for _ in range(3)]
    assert len(set(again)) == 1


def test_non_finite_or_unknown_scores_are_errors() -> None:
    with pytest.raises(ValueError, match="non-finite score for question a"):
        pdata.dpo_pairs(POOL, _scores({"a": [0.1, math.nan, 0.3, 0.2]}))
    with pytest.raises(ValueError, match="not in the generation pool"):
        pdata.dpo_pairs(POOL, _scores({"zz": [0.1, 0.2]}))


def test_rrhf_groups_keep_every_scored_completion() -> None:
    groups, stats = pdata.rrhf_groups(POOL, _scores({"a": [0.1, 0.2, 0.3, 0.4], "d": [1.0]}))
    assert len(groups) == 4 and set(groups["question_id"]) == {"a"}
    assert stats.skipped == {"fewer_than_two_completions": 1}


def test_sft_and_raft() -> None:
    pool = _pool({"a": [True, False, True], "b": [True, True, True]})
    sft, _ = pdata.sft_set(pool, {"a"})
    assert list(sft["sample_index"]) == [0, 2]
    raft, _ = pdata.raft_set(pool, _scores({"a": [0.1, 0.5, 0.3], "b": [0.0, 0.0, 2.0]}))
    assert list(zip(raft["question_id"], raft["sample_index"], strict=True)) == [("a", 1),
                                                                                 ("b", 2)]


def test_correctness_pairs_random_and_judged() -> None:
    pool = _pool({"h1": [True, False, False, True], "h2": [False] * 4, "h3": [True] * 4})
    rnd, stats = pdata.correctness_pairs(pool, {"h1", "h2", "h3"}, seed=0)
    assert list(rnd["question_id"]) == ["h1"]
    assert rnd.iloc[0]["chosen_sample"] in (0, 3) and rnd.iloc[0]["rejected_sample"] in (1, 2)
    assert stats.skipped == {"no_correct_completion": 1, "no_incorrect_completion": 1}
    judged, _ = pdata.correctness_pairs(
        pool, {"h1"}, scores=_scores({"h1": [0.2, 0.9, 0.1, 0.7]}))
    assert (judged.iloc[0]["chosen_sample"], judged.iloc[0]["rejected_sample"]) == (3, 2)


def _texts_pool(texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"question_id": "q", "sample_index": range(len(texts)), "prompt": "p",
                         "completion": texts, "correct": True})


def _q_scores(values: list[float]) -> pd.DataFrame:
    return _scores({"q": values})


def test_paper_rule_keeps_equal_texts_and_skips_only_equal_scores() -> None:
    """Issue 13.2: y_w = argmax, y_l = argmin even when their texts are equal (the default)."""
    pool = _texts_pool(["\\boxed{5}", "\\boxed{5}", "2 + 3 = 5 \\boxed{5}", "\\boxed{5}"])
    table, stats = pdata.dpo_pairs(pool, _q_scores([0.9, 0.1, 0.5, 0.3]))
    assert (table.loc[0, "chosen_sample"], table.loc[0, "rejected_sample"]) == (0, 1)
    assert table.loc[0, "chosen"] == table.loc[0, "rejected"]
    assert stats.adjusted == {} and stats.skipped == {}
    same, stats = pdata.dpo_pairs(pool.assign(completion="\\boxed{5}"),
                                  _q_scores([0.9, 0.1, 0.5, 0.3]))
    assert len(same) == 1 and stats.skipped == {}
    _, stats = pdata.dpo_pairs(pool, _q_scores([0.4] * 4))
    assert stats.skipped == {"all_scores_equal": 1}


def test_paper_rule_breaks_argmin_ties_at_random() -> None:
    pool = _texts_pool(["A", "B", "C", "D"])
    picks = {int(pdata.dpo_pairs(pool, _q_scores([1.0, 0.0, 0.0, 0.0]), seed=s)[0]
                 .iloc[0]["rejected_sample"]) for s in range(30)}
    assert picks == {1, 2, 3}


def test_distinct_texts_option_puts_different_texts_on_both_sides() -> None:
    texts = ["\\boxed{5}", "\\boxed{5}", "2 + 3 = 5 \\boxed{5}", "\\boxed{5}"]
    # the argmin (sample 1) has the argmax's text: the next lowest different text is y_l
    table, stats = pdata.dpo_pairs(_texts_pool(texts), _q_scores([0.9, 0.1, 0.5, 0.3]),
                                   distinct_texts=True)
    assert table.loc[0, "chosen_sample"] == 0 and table.loc[0, "rejected_sample"] == 2
    assert stats.as_metadata()["adjusted_rejected_text_equal_to_chosen"] == 1
    table, stats = pdata.dpo_pairs(_texts_pool(["\\boxed{5}"] * 4),
                                   _q_scores([0.9, 0.1, 0.5, 0.3]), distinct_texts=True)
    assert table.empty and stats.skipped == {"all_completions_same_text": 1}


def test_distinct_texts_finds_the_pair_whenever_one_exists() -> None:
    """Texts [A, B, A], scores [1, 1, 0]: (1, 2) is the only pair with different texts; the
    old rule drew y_w = 0 first and then skipped the question in about half of the seeds."""
    pool, scores = _texts_pool(["A", "B", "A"]), _q_scores([1.0, 1.0, 0.0])
    for seed in range(200):
        table, stats = pdata.dpo_pairs(pool, scores, seed=seed, distinct_texts=True)
        assert (table.loc[0, "chosen_sample"], table.loc[0, "rejected_sample"]) == (1, 2), seed
        assert stats.skipped == {}
        assert stats.adjusted == {"chosen_tie_restricted_to_distinct_text": 1}


def test_distinct_texts_prefers_the_widest_pair_and_breaks_ties_reproducibly() -> None:
    # y_w = 0 (A) could only reach C (0.5); y_w = 1 or 3 (B) reach the argmin A (sample 2)
    pool = _texts_pool(["A", "B", "A", "B", "C"])
    scores = _q_scores([1.0, 1.0, 0.0, 1.0, 0.5])
    pairs = set()
    for seed in range(60):
        table, stats = pdata.dpo_pairs(pool, scores, seed=seed, distinct_texts=True)
        pairs.add((int(table.loc[0, "chosen_sample"]), int(table.loc[0, "rejected_sample"])))
        assert "rejected_text_equal_to_chosen" not in stats.adjusted
    assert pairs == {(1, 2), (3, 2)}
    runs = [pdata.dpo_pairs(pool, scores, seed=5, distinct_texts=True)[0] for _ in range(3)]
    assert all(r.equals(runs[0]) for r in runs)
