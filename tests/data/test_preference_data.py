import math
import random

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from saturated_dag.data import preference_data as pdata


def _pool(correct: dict[str, list[bool]]) -> pl.DataFrame:
    rows = []
    for qid, flags in correct.items():
        for i, ok in enumerate(flags):
            rows.append({"question_id": qid, "sample_index": i, "prompt": f"P {qid}",
                         "completion": f"{qid} completion {i}", "correct": ok})
    return pl.DataFrame(rows)


def _scores(values: dict[str, list[float]]) -> pl.DataFrame:
    return pl.DataFrame([{"question_id": q, "sample_index": i, "score": s}
                         for q, scores in values.items() for i, s in enumerate(scores)],
                        schema={"question_id": pl.String, "sample_index": pl.Int64,
                                "score": pl.Float64})


POOL = _pool({"a": [True] * 4, "b": [True] * 3, "c": [True] * 2, "d": [True]})


def test_dpo_pairs_argmax_argmin_and_skips() -> None:
    scores = _scores({"a": [0.2, 0.9, 0.1, 0.5], "b": [0.4, 0.4, 0.4], "c": [1.0, 0.0],
                      "d": [0.7]})
    pairs, stats = pdata.dpo_pairs(POOL, scores, seed=3)
    assert pairs["question_id"].to_list() == ["a", "c"]
    a = pairs.row(0, named=True)
    assert (a["chosen_sample"], a["rejected_sample"]) == (1, 2)
    assert (pairs["chosen"] != pairs["rejected"]).all()
    assert stats.skipped == {"all_scores_equal": 1, "fewer_than_two_completions": 1}
    assert stats.as_metadata()["tie_break_seed"] == 3


def test_dpo_ties_broken_at_random_but_reproducibly() -> None:
    scores = _scores({"a": [1.0, 1.0, 1.0, 0.0]})
    picks = {pdata.dpo_pairs(POOL, scores, seed=s)[0]["chosen_sample"][0] for s in range(30)}
    assert picks == {0, 1, 2}
    again = [pdata.dpo_pairs(POOL, scores, seed=7)[0]["chosen_sample"][0] for _ in range(3)]
    assert len(set(again)) == 1


def test_draws_do_not_depend_on_the_row_order_of_pool_or_scores() -> None:
    """Questions are visited by id and completions by sample index, whatever order the
    frames arrive in, so one seed always gives the same pairs (the pandas version's order)."""
    rng = random.Random(0)
    ids = ["q10", "q9", "Q1", "é", "q/2"]
    pool = _pool({q: [True] * 6 for q in ids})
    scores = _scores({q: [rng.choice([0.0, 0.5, 1.0]) for _ in range(6)] for q in ids})
    shuffled = [pool.sample(fraction=1.0, shuffle=True, seed=s) for s in (1, 2)]
    for seed in range(20):
        first = pdata.dpo_pairs(pool, scores, seed=seed)[0]
        assert first["question_id"].to_list() == sorted(ids)
        for frame in shuffled:
            again = pdata.dpo_pairs(frame, scores.sample(fraction=1.0, shuffle=True,
                                                         seed=seed), seed=seed)[0]
            assert_frame_equal(again, first)
        assert_frame_equal(pdata.raft_set(shuffled[0], scores, seed=seed)[0],
                           pdata.raft_set(pool, scores, seed=seed)[0])


def test_a_seeded_draw_is_pinned() -> None:
    """The exact picks of one seed, as the pandas version drew them: a change of the
    candidates' order would change them."""
    pool = _pool({"a": [True] * 5, "b": [True] * 5})
    scores = _scores({"a": [1.0, 0.0, 1.0, 0.0, 1.0], "b": [0.5, 0.5, 0.0, 0.0, 0.0]})
    pairs, _ = pdata.dpo_pairs(pool, scores, seed=1)
    assert pairs.select("chosen_sample", "rejected_sample").rows() == [(0, 1), (1, 2)]
    raft, _ = pdata.raft_set(pool, scores, seed=1)
    assert raft["sample_index"].to_list() == [0, 0]


def test_non_finite_or_unknown_scores_are_errors() -> None:
    with pytest.raises(ValueError, match="non-finite score for question a"):
        pdata.dpo_pairs(POOL, _scores({"a": [0.1, math.nan, 0.3, 0.2]}))
    with pytest.raises(ValueError, match="non-finite score for question a"):
        pdata.dpo_pairs(POOL, _scores({"a": [0.1, None, 0.3, 0.2]}))
    with pytest.raises(ValueError, match="not in the generation pool"):
        pdata.dpo_pairs(POOL, _scores({"zz": [0.1, 0.2]}))


def test_duplicate_rows_are_errors_that_name_the_completion() -> None:
    twice = pl.concat([_scores({"a": [0.1, 0.2]}), _scores({"a": [0.3]})])
    with pytest.raises(ValueError, match="scores table has more than one row for question "
                                         "a, sample 0"):
        pdata.dpo_pairs(POOL, twice)
    with pytest.raises(ValueError, match="generation pool has more than one row"):
        pdata.rrhf_groups(pl.concat([POOL, POOL.head(1)]), _scores({"a": [0.1, 0.2]}))


def test_rrhf_groups_keep_every_scored_completion() -> None:
    groups, stats = pdata.rrhf_groups(POOL, _scores({"a": [0.1, 0.2, 0.3, 0.4], "d": [1.0]}))
    assert groups.height == 4 and set(groups["question_id"]) == {"a"}
    assert groups.schema == pl.Schema(pdata.RRHF_SCHEMA)
    assert stats.skipped == {"fewer_than_two_completions": 1}
    assert (stats.questions_in, stats.rows_out) == (2, 4)


def test_sft_and_raft() -> None:
    pool = _pool({"a": [True, False, True], "b": [True, True, True]})
    sft, _ = pdata.sft_set(pool, {"a"})
    assert sft["sample_index"].to_list() == [0, 2]
    raft, _ = pdata.raft_set(pool, _scores({"a": [0.1, 0.5, 0.3], "b": [0.0, 0.0, 2.0]}))
    assert raft.select("question_id", "sample_index").rows() == [("a", 1), ("b", 2)]


def test_empty_results_keep_their_columns() -> None:
    """A builder that keeps nothing returns its declared columns (an empty pandas frame had
    none), so a caller can still name them."""
    pairs, stats = pdata.dpo_pairs(POOL, _scores({"b": [0.4, 0.4, 0.4]}))
    assert pairs.is_empty() and pairs.schema == pl.Schema(pdata.PAIR_SCHEMA)
    assert stats.skipped == {"all_scores_equal": 1}
    groups, _ = pdata.rrhf_groups(POOL, _scores({"d": [1.0]}))
    assert groups.is_empty() and groups.schema == pl.Schema(pdata.RRHF_SCHEMA)
    sft, _ = pdata.sft_set(POOL, set())
    assert sft.is_empty() and sft.schema == pl.Schema(pdata.SFT_SCHEMA)


def test_correct_first_ranks_every_correct_completion_above_every_incorrect_one() -> None:
    scores = pl.DataFrame({"question_id": ["h", "h", "h", "z", "z"],
                           "sample_index": [0, 1, 2, 0, 1],
                           "correct": [False, True, True, False, False],
                           "score": [0.9, 0.1, 0.5, 0.3, 0.2]})
    shifted = pdata.correct_first(scores)
    assert shifted.columns == scores.columns
    assert shifted["question_id"].to_list() == ["h", "h", "h"]  # z: no correct completion
    # span 0.8 over the kept rows: correct ones shifted by 1.8, the scorer's order kept within
    assert shifted["score"].to_list() == pytest.approx([0.9, 1.9, 2.3])
    with pytest.raises(ValueError, match="'correct' column"):
        pdata.correct_first(scores.drop("correct"))


def test_correctness_pairs_random_and_judged() -> None:
    pool = _pool({"h1": [True, False, False, True], "h2": [False] * 4, "h3": [True] * 4})
    rnd, stats = pdata.correctness_pairs(pool, {"h1", "h2", "h3"}, seed=0)
    assert rnd["question_id"].to_list() == ["h1"]
    assert rnd["chosen_sample"][0] in (0, 3) and rnd["rejected_sample"][0] in (1, 2)
    # unscored pairs: the score columns are nulls of the declared float type
    assert rnd.schema == pl.Schema(pdata.PAIR_SCHEMA)
    assert rnd["chosen_score"].null_count() == rnd.height
    assert stats.skipped == {"no_correct_completion": 1, "no_incorrect_completion": 1}
    judged, _ = pdata.correctness_pairs(
        pool, {"h1"}, scores=_scores({"h1": [0.2, 0.9, 0.1, 0.7]}))
    assert (judged["chosen_sample"][0], judged["rejected_sample"][0]) == (3, 2)
    _, stats = pdata.correctness_pairs(pool, {"h1"}, scores=_scores({"h1": [0.2, 0.9, 0.1]}))
    assert stats.skipped == {"unscored_completion": 1}


def test_shuffled_correctness_pairs_are_the_random_pairs_half_swapped() -> None:
    """The hard split's negative control: the same pairs as the random ones, with chosen and
    rejected exchanged on exactly half the questions (rounded down), so a pair's direction no
    longer says which completion is correct. The default (``shuffled=False``) swaps none."""
    outcomes = {f"h{i}": [i % 3 == 0, True, False, i % 2 == 0] for i in range(9)}
    pool = _pool(outcomes)
    ids = set(outcomes)
    plain, _ = pdata.correctness_pairs(pool, ids, seed=4)
    shuffled, stats = pdata.correctness_pairs(pool, ids, seed=4, shuffled=True)
    assert plain.height == shuffled.height == 9
    assert shuffled.schema == plain.schema
    correct = {(q, i): ok for q, flags in outcomes.items() for i, ok in enumerate(flags)}
    assert all(correct[(q, c)] for q, c in zip(plain["question_id"], plain["chosen_sample"],
                                               strict=True))
    swapped = [q for q, c in zip(shuffled["question_id"], shuffled["chosen_sample"],
                                 strict=True) if not correct[(q, c)]]
    assert len(swapped) == 4 and stats.adjusted == {"chosen_and_rejected_swapped": 4}
    merged = plain.join(shuffled, on="question_id", suffix="_s")
    for row in merged.iter_rows(named=True):
        same = (row["chosen"], row["rejected"]) == (row["chosen_s"], row["rejected_s"])
        flipped = ((row["chosen"], row["rejected"], row["chosen_sample"])
                   == (row["rejected_s"], row["chosen_s"], row["rejected_sample_s"]))
        assert same != flipped  # each pair is the random one, kept or exchanged
        assert flipped == (row["question_id"] in swapped)
    again, _ = pdata.correctness_pairs(pool, ids, seed=4, shuffled=True)
    assert again.equals(shuffled)  # the swap has a seed of its own
    with pytest.raises(ValueError, match="take no scores"):
        pdata.correctness_pairs(pool, ids, scores=_scores({"h0": [0.1, 0.2, 0.3, 0.4]}),
                                shuffled=True)


def _texts_pool(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": "q", "sample_index": range(len(texts)), "prompt": "p",
                         "completion": texts, "correct": True})


def _q_scores(values: list[float]) -> pl.DataFrame:
    return _scores({"q": values})


def _pair(table: pl.DataFrame) -> tuple[int, int]:
    return table["chosen_sample"][0], table["rejected_sample"][0]


def test_paper_rule_keeps_equal_texts_and_skips_only_equal_scores() -> None:
    """Issue 13.2: y_w = argmax, y_l = argmin even when their texts are equal (the default)."""
    pool = _texts_pool(["\\boxed{5}", "\\boxed{5}", "2 + 3 = 5 \\boxed{5}", "\\boxed{5}"])
    table, stats = pdata.dpo_pairs(pool, _q_scores([0.9, 0.1, 0.5, 0.3]))
    assert _pair(table) == (0, 1)
    assert table["chosen"][0] == table["rejected"][0]
    assert stats.adjusted == {} and stats.skipped == {}
    same, stats = pdata.dpo_pairs(pool.with_columns(completion=pl.lit("\\boxed{5}")),
                                  _q_scores([0.9, 0.1, 0.5, 0.3]))
    assert same.height == 1 and stats.skipped == {}
    _, stats = pdata.dpo_pairs(pool, _q_scores([0.4] * 4))
    assert stats.skipped == {"all_scores_equal": 1}


def test_paper_rule_breaks_argmin_ties_at_random() -> None:
    pool = _texts_pool(["A", "B", "C", "D"])
    picks = {pdata.dpo_pairs(pool, _q_scores([1.0, 0.0, 0.0, 0.0]), seed=s)[0]
             ["rejected_sample"][0] for s in range(30)}
    assert picks == {1, 2, 3}


def test_distinct_texts_option_puts_different_texts_on_both_sides() -> None:
    texts = ["\\boxed{5}", "\\boxed{5}", "2 + 3 = 5 \\boxed{5}", "\\boxed{5}"]
    # the argmin (sample 1) has the argmax's text: the next lowest different text is y_l
    table, stats = pdata.dpo_pairs(_texts_pool(texts), _q_scores([0.9, 0.1, 0.5, 0.3]),
                                   distinct_texts=True)
    assert _pair(table) == (0, 2)
    assert stats.as_metadata()["adjusted_rejected_text_equal_to_chosen"] == 1
    table, stats = pdata.dpo_pairs(_texts_pool(["\\boxed{5}"] * 4),
                                   _q_scores([0.9, 0.1, 0.5, 0.3]), distinct_texts=True)
    assert table.is_empty() and stats.skipped == {"all_completions_same_text": 1}


def test_distinct_texts_finds_the_pair_whenever_one_exists() -> None:
    """Texts [A, B, A], scores [1, 1, 0]: (1, 2) is the only pair with different texts; the
    old rule drew y_w = 0 first and then skipped the question in about half of the seeds."""
    pool, scores = _texts_pool(["A", "B", "A"]), _q_scores([1.0, 1.0, 0.0])
    for seed in range(200):
        table, stats = pdata.dpo_pairs(pool, scores, seed=seed, distinct_texts=True)
        assert _pair(table) == (1, 2), seed
        assert stats.skipped == {}
        assert stats.adjusted == {"chosen_tie_restricted_to_distinct_text": 1}


def test_distinct_texts_prefers_the_widest_pair_and_breaks_ties_reproducibly() -> None:
    # y_w = 0 (A) could only reach C (0.5); y_w = 1 or 3 (B) reach the argmin A (sample 2)
    pool = _texts_pool(["A", "B", "A", "B", "C"])
    scores = _q_scores([1.0, 1.0, 0.0, 1.0, 0.5])
    pairs = set()
    for seed in range(60):
        table, stats = pdata.dpo_pairs(pool, scores, seed=seed, distinct_texts=True)
        pairs.add(_pair(table))
        assert "rejected_text_equal_to_chosen" not in stats.adjusted
    assert pairs == {(1, 2), (3, 2)}
    runs = [pdata.dpo_pairs(pool, scores, seed=5, distinct_texts=True)[0] for _ in range(3)]
    assert all(r.equals(runs[0]) for r in runs)
