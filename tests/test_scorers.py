"""Completion selection, random and entropy scores (core, no Dagster)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from saturated_dag import partitions
from saturated_dag.generation.entropy import EntropyTracker
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.scorers.entropy_scores import TeacherForcedEntropy, entropy_scores
from saturated_dag.scorers.random_scores import random_scores
from saturated_dag.scorers.selection import missing_or_nonfinite, select_completions
from tests.scoring_data import make_partitions, make_pool

SPLITS = (["saturated", "strict_saturated"], ["hard"])


def _selection(pool=None, **kw):
    pool = make_pool() if pool is None else pool
    return select_completions(pool, make_partitions(pool), *SPLITS, **kw)


def test_selection_follows_the_rules() -> None:
    sel = _selection()
    sizes = sel.rows.groupby("question_id").size().to_dict()
    assert sizes == {"q_sat1": 4, "q_sat2": 4, "q_strict": 4, "q_hard1": 4}
    hard = sel.rows[sel.rows["split"] == "hard"]
    assert hard["correct"].sum() == 1 and len(hard) == 4  # incorrect ones kept on hard
    assert sel.rows.loc[sel.rows["split"] != "hard", "correct"].all()
    assert sel.skipped["hard_no_correct"] == 1


def test_question_with_one_correct_completion_is_skipped_and_counted() -> None:
    pool = make_pool()
    parts = partitions.partition(pool, saturated_min=0.25, hard_max=0.0)
    sel = select_completions(pool, parts, ["saturated", "strict_saturated"], [])
    assert "q_one" not in set(sel.rows["question_id"])  # 1/4 correct: nothing to rank
    assert sel.skipped["strict_saturated_fewer_than_2_correct"] == 1
    with pytest.raises(ValueError, match="both"):
        select_completions(pool, parts, ["hard"], ["hard"])


def test_random_scores_are_seeded_per_question() -> None:
    sel = _selection()
    a, b = random_scores(sel, seed=1), random_scores(sel, seed=1)
    assert a["score"].tolist() == b["score"].tolist()
    assert not np.allclose(a["score"], random_scores(sel, seed=2)["score"])
    assert ((a["score"] >= 0) & (a["score"] < 1)).all()
    # dropping a question leaves the others' scores unchanged
    sub = _selection()
    sub.rows = sub.rows[sub.rows["question_id"] != "q_sat1"]
    kept = random_scores(sub, seed=1).set_index(["question_id", "sample_index"])["score"]
    full = a.set_index(["question_id", "sample_index"])["score"]
    assert np.allclose(kept, full.loc[kept.index])
    assert missing_or_nonfinite(a, sel) == {"expected": 16, "missing": 0, "nonfinite": 0}


def test_entropy_score_is_inverse_entropy_with_epsilon() -> None:
    pool = make_pool()
    pool.loc[pool["sample_index"] == 0, "mean_entropy"] = 0.0
    sel = _selection(pool)
    scores, routes = entropy_scores(sel, epsilon=1e-8)
    assert routes == {"generation_pass": 16, "teacher_forced": 0}
    zero = scores[scores["mean_entropy"] == 0.0]
    assert len(zero) and (zero["score"] == 1e8).all()
    rest = scores[scores["mean_entropy"] > 0]
    assert np.allclose(rest["score"], 1 / rest["mean_entropy"])
    with pytest.raises(ValueError, match="teacher-forced"):
        entropy_scores(_selection(make_pool(entropy_nan=True)))


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
    pool["prompt"] = [backend.render(p) for p in pool["problem"]]
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
    pool["mean_entropy"] = generated
    from_generation, routes_g = entropy_scores(_selection(pool))
    pool["mean_entropy"] = float("nan")
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
    pool["prompt"] = [backend.render(p) for p in pool["problem"]]
    row = pool.iloc[0]
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
    first = scores[(scores["question_id"] == row["question_id"])
                   & (scores["sample_index"] == row["sample_index"])]
    assert float(first["mean_entropy"].iloc[0]) == pytest.approx(direct_text, 1e-5)
