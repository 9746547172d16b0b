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


def test_dpo_pair_never_has_the_same_text_on_both_sides() -> None:
    import pandas as pd

    from saturated_dag.preference_data import dpo_pairs

    texts = ["\\boxed{5}", "\\boxed{5}", "2 + 3 = 5 \\boxed{5}", "\\boxed{5}"]
    pool = pd.DataFrame({"question_id": "q", "sample_index": range(4), "prompt": "p",
                         "completion": texts, "correct": True})
    # the argmin (sample 1) has the argmax's text: the next lowest different text is y_l
    scores = pd.DataFrame({"question_id": "q", "sample_index": range(4),
                           "score": [0.9, 0.1, 0.5, 0.3]})
    table, stats = dpo_pairs(pool, scores)
    assert table.loc[0, "chosen_sample"] == 0 and table.loc[0, "rejected_sample"] == 2
    assert stats.as_metadata()["adjusted_rejected_text_equal_to_chosen"] == 1
    same = pool.assign(completion="\\boxed{5}")
    table, stats = dpo_pairs(same, scores)
    assert table.empty and stats.skipped == {"all_completions_same_text": 1}
