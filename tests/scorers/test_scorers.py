"""Completion selection, random and entropy scores (core, no Dagster)."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from polars.testing import assert_frame_equal
from transformers import LogitsProcessor, LogitsProcessorList

from saturated_dag.data import partitions
from saturated_dag.generation.entropy import EntropyTracker
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.scorers.entropy_scores import (
    TeacherForcedEntropy,
    entropy_scores,
    missing_entropies,
)
from saturated_dag.scorers.random_scores import random_scores
from saturated_dag.scorers.scored_completions import (
    SCORE_COLUMNS,
    ScoredCompletions,
    completions_to_score,
    missing_or_nonfinite,
    score_frame,
)
from tests.scoring_data import make_partitions, make_pool

SPLITS = (["saturated", "strict_saturated"], ["hard"])


def _selection(pool=None, **kw):
    pool = make_pool() if pool is None else pool
    return completions_to_score(pool, make_partitions(pool), *SPLITS, **kw)


def test_selection_follows_the_rules() -> None:
    sel = _selection()
    sizes = dict(sel.rows["question_id"].value_counts().iter_rows())
    assert sizes == {"q_sat1": 4, "q_sat2": 4, "q_strict": 4, "q_hard1": 4}
    hard = sel.rows.filter(pl.col("split") == "hard")
    assert hard["correct"].sum() == 1 and hard.height == 4  # incorrect ones kept on hard
    assert sel.rows.filter(pl.col("split") != "hard")["correct"].all()
    assert sel.skipped == {"saturated_fewer_than_2_correct": 0,
                           "strict_saturated_fewer_than_2_correct": 0,
                           "hard_no_correct": 1, "hard_fewer_than_2_completions": 0}


def test_selection_is_a_polars_frame_in_pandas_order() -> None:
    """The pool's columns then ``split``, rows by (question_id, sample_index) whatever the
    pool's order; ``groups()`` sorted by (question_id, split), each by sample_index (the
    order the random scorer draws in and the tournament schedules pairs by)."""
    pool = make_pool()
    shuffled = pool.sample(fraction=1.0, shuffle=True, seed=3)
    sel = completions_to_score(shuffled, make_partitions(pool), *SPLITS)
    assert isinstance(sel.rows, pl.DataFrame)
    assert sel.rows.columns == [*pool.columns, "split"]
    assert sel.rows.schema["split"] == pl.String and sel.rows.schema["correct"] == pl.Boolean
    assert_frame_equal(sel.rows, _selection().rows)
    keys = list(zip(sel.rows["question_id"], sel.rows["sample_index"], strict=True))
    assert keys == sorted(keys)
    sel.rows = sel.rows.reverse()  # groups() sorts for itself
    groups = sel.groups()
    assert [(q, s) for q, s, _ in groups] == [
        ("q_hard1", "hard"), ("q_sat1", "saturated"), ("q_sat2", "saturated"),
        ("q_strict", "strict_saturated")]
    assert all(rows["sample_index"].to_list() == [0, 1, 2, 3] for _, _, rows in groups)
    assert ScoredCompletions(sel.rows.head(0)).groups() == []


def test_partitions_with_a_question_twice_are_refused() -> None:
    pool = make_pool()
    parts = make_partitions(pool)
    with pytest.raises(ValueError, match=r"more than once.*q_sat1"):
        completions_to_score(pool, pl.concat([parts, parts.head(1)]), *SPLITS)


def test_question_with_one_correct_completion_is_skipped_and_counted() -> None:
    pool = make_pool()
    parts = partitions.partition(pool, saturated_min=0.25, hard_max=0.0)
    sel = completions_to_score(pool, parts, ["saturated", "strict_saturated"], [])
    assert "q_one" not in sel.rows["question_id"].to_list()  # 1/4 correct: nothing to rank
    assert sel.skipped["strict_saturated_fewer_than_2_correct"] == 1
    with pytest.raises(ValueError, match="both"):
        completions_to_score(pool, parts, ["hard"], ["hard"])


PANDAS_RANDOM_SCORES_SEED0 = [
    0.698358739919, 0.155148192437, 0.836923062292, 0.699602821009,  # q_hard1
    0.767351481366, 0.250128982628, 0.150030998186, 0.073493309166,  # q_sat1
    0.775704535119, 0.037770190096, 0.192186911162, 0.657053468042,  # q_sat2
    0.289944321894, 0.875778697191, 0.182044458443, 0.46175733368,   # q_strict
]
"""``random_scores(seed=0)`` of this selection as the pandas implementation drew them
(rounded to 12 places): the polars port must not change a single draw."""


def test_random_scores_are_seeded_per_question() -> None:
    sel = _selection()
    a, b = random_scores(sel, seed=1), random_scores(sel, seed=1)
    assert_frame_equal(a, b)
    assert not np.allclose(a["score"], random_scores(sel, seed=2)["score"])
    assert ((a["score"] >= 0) & (a["score"] < 1)).all()
    # dropping a question leaves the others' scores unchanged
    sub = _selection()
    sub.rows = sub.rows.filter(pl.col("question_id") != "q_sat1")
    kept = random_scores(sub, seed=1)
    assert_frame_equal(kept, a.filter(pl.col("question_id") != "q_sat1"))
    assert missing_or_nonfinite(a, sel) == {"expected": 16, "missing": 0, "nonfinite": 0}


def test_random_scores_equal_the_pandas_draws() -> None:
    scores = random_scores(_selection(), seed=0)
    assert scores.columns == SCORE_COLUMNS
    assert scores.schema == pl.Schema({
        "question_id": pl.String, "sample_index": pl.Int64, "split": pl.String,
        "correct": pl.Boolean, "scorer": pl.String, "score": pl.Float64})
    assert scores["question_id"].to_list() == [q for q in ("q_hard1", "q_sat1", "q_sat2",
                                                          "q_strict") for _ in range(4)]
    assert scores["sample_index"].to_list() == [0, 1, 2, 3] * 4
    assert [round(x, 12) for x in scores["score"]] == PANDAS_RANDOM_SCORES_SEED0
    empty = random_scores(ScoredCompletions(_selection().rows.head(0)))
    assert empty.height == 0 and empty.schema == scores.schema


def test_missing_null_nan_and_infinite_scores_are_counted() -> None:
    sel = _selection()
    scores = random_scores(sel).with_row_index("i").with_columns(
        score=pl.when(pl.col("i") == 0).then(None)
        .when(pl.col("i") == 1).then(float("nan"))
        .when(pl.col("i") == 2).then(float("inf"))
        .otherwise(pl.col("score"))).drop("i")
    assert missing_or_nonfinite(scores.slice(4), sel) == {
        "expected": 16, "missing": 4, "nonfinite": 0}  # q_hard1's rows absent
    assert missing_or_nonfinite(scores, sel) == {"expected": 16, "missing": 2, "nonfinite": 1}


def test_score_frame_layout_and_length_check() -> None:
    rows = _selection().rows
    frame = score_frame(rows, "x", np.arange(rows.height),
                        {"n": np.arange(rows.height), "label": ["a"] * rows.height})
    assert frame.columns == [*SCORE_COLUMNS, "n", "label"]
    assert frame.schema["score"] == pl.Float64 and frame.schema["n"] == pl.Int64
    assert (frame["scorer"] == "x").all()
    with pytest.raises(ValueError, match="3 scores for 16 selected completions"):
        score_frame(rows, "x", [0.1, 0.2, 0.3])


def _entropy_where(pool: pl.DataFrame, sample_index: int, value: float | None) -> pl.DataFrame:
    return pool.with_columns(mean_entropy=pl.when(pl.col("sample_index") == sample_index)
                             .then(pl.lit(value, dtype=pl.Float64))
                             .otherwise(pl.col("mean_entropy")))


def test_entropy_score_is_inverse_entropy_with_epsilon() -> None:
    sel = _selection(_entropy_where(make_pool(), 0, 0.0))
    scores, routes = entropy_scores(sel, epsilon=1e-8)
    assert routes == {"generation_pass": 16, "teacher_forced": 0}
    assert scores.columns == [*SCORE_COLUMNS, "mean_entropy"]
    zero = scores.filter(pl.col("mean_entropy") == 0.0)
    assert zero.height and (zero["score"] == 1e8).all()
    rest = scores.filter(pl.col("mean_entropy") > 0)
    assert np.allclose(rest["score"], 1 / rest["mean_entropy"])
    with pytest.raises(ValueError, match="teacher-forced"):
        entropy_scores(_selection(make_pool(entropy_nan=True)))


def test_null_and_nan_entropies_both_go_teacher_forced() -> None:
    """A missing H-bar reads as null from Parquet and NaN from a float array: both are
    recomputed, and only they."""
    pool = _entropy_where(_entropy_where(make_pool(), 1, None), 2, float("nan"))
    calls: list[tuple[str, str]] = []

    def teacher(prompt: str, completion: str, finish_reason: str) -> float:
        calls.append((completion, finish_reason))
        return 2.0

    sel = _selection(pool)
    assert missing_entropies(sel.rows) == 8
    scores, routes = entropy_scores(sel, teacher_forced=teacher)
    assert routes == {"generation_pass": 8, "teacher_forced": 8} and len(calls) == 8
    recomputed = scores.filter(pl.col("sample_index").is_in([1, 2]))
    assert (recomputed["mean_entropy"] == 2.0).all() and (recomputed["score"] == 0.5).all()
    kept = scores.filter(pl.col("sample_index").is_in([0, 3]))
    assert np.allclose(kept["mean_entropy"], 0.5 + 0.1 * kept["sample_index"].to_numpy())


class _Force(LogitsProcessor):
    """Makes generate emit given tokens (after the entropy tracker saw the raw logits)."""

    def __init__(self, tokens: list[int], start: int):
        self.tokens, self.start = tokens, start

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor):
        step = input_ids.shape[1] - self.start
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.tokens[min(step, len(self.tokens) - 1)]] = 0.0
        return forced


def test_entropy_routes_agree(tiny_model_dir: Path) -> None:
    """Generation-pass H-bar (EntropyTracker while generating the pool's tokens) and the
    scorer's teacher-forced H-bar (re-tokenised text, EOS appended) agree within 1e-4."""
    backend = TransformersBackend.load(str(tiny_model_dir))
    teacher = TeacherForcedEntropy.from_backend(backend)
    pool = make_pool()
    pool = pool.with_columns(prompt=pl.Series([backend.render(p) for p in pool["problem"]]))
    generated = []
    for prompt, text in zip(pool["prompt"], pool["completion"], strict=True):
        prompt_ids = backend.encode_prompt(prompt)
        tokens = teacher.completion_ids(text, "stop")
        tracker = EntropyTracker(len(prompt_ids), backend.eos_ids)
        ids = torch.tensor([prompt_ids])
        out = backend.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
            max_new_tokens=len(tokens),
            logits_processor=LogitsProcessorList([tracker, _Force(tokens, len(prompt_ids))]),
            pad_token_id=backend.tokenizer.pad_token_id, eos_token_id=backend.eos_ids)
        assert out[0, len(prompt_ids):].tolist() == tokens
        generated.append(tracker.means()[0])
    pool = pool.with_columns(mean_entropy=pl.Series(generated, dtype=pl.Float64))
    from_generation, routes_g = entropy_scores(_selection(pool))
    pool = pool.with_columns(mean_entropy=pl.lit(None, dtype=pl.Float64))
    from_teacher, routes_t = entropy_scores(_selection(pool), teacher_forced=teacher)
    assert routes_g["teacher_forced"] == 0 and routes_t["generation_pass"] == 0
    assert teacher.calls == 16
    assert np.allclose(from_generation["mean_entropy"], from_teacher["mean_entropy"], atol=1e-4)
    assert np.allclose(from_generation["score"], from_teacher["score"], rtol=1e-4)


def test_entropy_without_eos_averages_the_text_tokens_only(tiny_model_dir: Path) -> None:
    """``scoring.entropy_include_eos: false``: H-bar over the completion's text tokens, the
    EOS step left out (checked against per-token entropies of one direct forward pass); every
    row is recomputed teacher-forced, since the generation pass's mean includes the EOS."""
    from saturated_dag.generation.entropy import teacher_forced_mean_entropy, token_entropy

    backend = TransformersBackend.load(str(tiny_model_dir))
    with_eos = TeacherForcedEntropy.from_backend(backend)
    without = TeacherForcedEntropy.from_backend(backend, include_eos=False)
    pool = make_pool()
    pool = pool.with_columns(prompt=pl.Series([backend.render(p) for p in pool["problem"]]))
    row = pool.row(0, named=True)
    prompt_ids = backend.encode_prompt(row["prompt"])
    text_ids = without.completion_ids(row["completion"], "stop")
    assert with_eos.completion_ids(row["completion"], "stop") == [*text_ids, backend.eos_ids[0]]
    ids = torch.tensor([prompt_ids + text_ids + [backend.eos_ids[0]]])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0]
    # position t predicts token t+1: text tokens are predicted from len(prompt)-1 on
    per_token = token_entropy(logits[len(prompt_ids) - 1 : -1].double())
    assert per_token.shape[0] == len(text_ids) + 1
    direct_text, direct_all = float(per_token[:-1].mean()), float(per_token.mean())
    assert without(row["prompt"], row["completion"], "stop") == pytest.approx(direct_text, 1e-5)
    assert with_eos(row["prompt"], row["completion"], "stop") == pytest.approx(direct_all, 1e-5)
    # (a random tiny model's entropies are all near log |V|, so the two means are close; what
    # the option changes is which positions are averaged, checked exactly here)
    assert without(row["prompt"], row["completion"], "stop") == teacher_forced_mean_entropy(
        backend.model, prompt_ids, text_ids)
    # a completion with no text token keeps its EOS: its only generated token
    assert without.completion_ids("", "stop") == [backend.eos_ids[0]]

    calls = without.calls
    scores, routes = entropy_scores(_selection(pool), teacher_forced=without, include_eos=False)
    assert routes == {"generation_pass": 0, "teacher_forced": 16}
    assert without.calls == calls + 16
    first = scores.filter((pl.col("question_id") == row["question_id"])
                          & (pl.col("sample_index") == row["sample_index"]))
    assert float(first["mean_entropy"][0]) == pytest.approx(direct_text, 1e-5)
