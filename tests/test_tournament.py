"""Pair scheduling, win rates, judges (fake, rubric, LLM on a tiny model)."""

import re
from collections.abc import Sequence
from math import comb
from pathlib import Path

import pytest
import torch

from saturated_dag.generation.base import Sample, SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.judges import (
    JudgeRequest,
    LlmJudge,
    RubricJudge,
    Verdict,
    chain_sum_expression,
    constrained_regex,
    first_judgment,
    render_judge_prompt,
    strip_partial_judgment,
)
from saturated_dag.scorers.selection import select_completions
from saturated_dag.scorers.tournament import expected_calls, run_tournament, schedule_pairs
from saturated_dag.tasks.prompts import chain_sum_problem
from tests.scoring_data import make_partitions, make_pool


def _selection():
    pool = make_pool()
    return select_completions(pool, make_partitions(pool), ["saturated", "strict_saturated"],
                              ["hard"])


class LongerWins:
    """Prefers the longer solution; position-biased variants for the both-orders test."""

    name = "longer"

    def __init__(self, always_first: bool = False, fail_every: int = 0):
        self.always_first, self.fail_every, self.calls = always_first, fail_every, 0

    def judge(self, requests: Sequence[JudgeRequest], log=None) -> list[Verdict]:
        out = []
        for r in requests:
            self.calls += 1
            if self.fail_every and self.calls % self.fail_every == 0:
                out.append(Verdict(None))
            elif self.always_first:
                out.append(Verdict(0))
            else:
                out.append(Verdict(int(len(r.solutions[1]) > len(r.solutions[0]))))
        return out


def test_schedule_every_unordered_pair_once() -> None:
    pairs = schedule_pairs(5)
    assert len(pairs) == comb(5, 2) and len({frozenset(p) for p in pairs}) == 10
    both = schedule_pairs(5, both_orders=True)
    assert len(both) == 20 and len(set(both)) == 20
    assert expected_calls([4, 4, 2], both_orders=False) == 6 + 6 + 1
    assert expected_calls([4, 4, 2], both_orders=True) == 26


def test_win_rates_and_call_count() -> None:
    sel = _selection()
    judge = LongerWins()
    result = run_tournament(sel, judge, "fake")
    assert judge.calls == result.summary["judge_calls"] == 4 * comb(4, 2)
    assert result.summary["expected_judge_calls"] == 24
    scores = result.scores
    assert (scores["comparisons"] == 3).all()
    assert (scores["score"] == scores["wins"] / 3).all()
    for _qid, group in scores.groupby("question_id"):
        # a strict order by length: win rates are 0, 1/3, 2/3, 1
        assert sorted(group["score"].round(4)) == [0.0, 0.3333, 0.6667, 1.0]
    assert len(result.comparisons) == 24
    assert result.summary["parse_failures"] == 0


def test_both_orders_cancels_position_bias() -> None:
    sel = _selection()
    biased = run_tournament(sel, LongerWins(always_first=True), "fake")
    assert biased.scores["score"].nunique() > 1
    judge = LongerWins(always_first=True)
    fair = run_tournament(sel, judge, "fake", both_orders=True)
    assert judge.calls == 48 == fair.summary["expected_judge_calls"]
    assert (fair.scores["score"] == 0.5).all() and (fair.scores["comparisons"] == 6).all()
    assert fair.summary["first_position_win_rate"] == 1.0


def test_parse_failures_are_counted_not_hidden() -> None:
    result = run_tournament(_selection(), LongerWins(fail_every=4), "fake")
    assert result.summary["parse_failures"] == 6
    assert result.scores["parse_failures"].sum() == 12  # two completions per failure
    assert (result.scores["comparisons"] == 3).all()


def test_rubric_judge_prefers_the_cleaner_solution_and_refuses_gsm8k() -> None:
    problem = chain_sum_problem("3 + 4 - 2")
    assert chain_sum_expression(problem) == "3 + 4 - 2"
    good = "3 + 4 = 7\n7 - 2 = 5\n\\boxed{5}"
    hedged = "I think maybe 3 + 4 = 7, probably 7 - 2 = 5. Not sure. \\boxed{5}"
    (v1, v2, v3) = RubricJudge().judge([JudgeRequest("chain_sum", problem, (good, hedged)),
                                        JudgeRequest("chain_sum", problem, (hedged, good)),
                                        JudgeRequest("chain_sum", problem, (good, good))])
    assert (v1.choice, v2.choice) == (0, 1) and not v1.tie
    assert v3.tie
    with pytest.raises(ValueError, match="GSM8K"):
        RubricJudge().judge([JudgeRequest("gsm8k", "How many?", ("a", "b"))])
    ties = run_tournament(_selection(), RubricJudge(), "rubric")
    assert ties.scores["score"].between(0, 1).all()


def test_judgment_parsing_helpers() -> None:
    assert first_judgment("ok\n**Judgment: [1]**\n---\n## EVALUATION C", 1) == (
        1, "ok\n**Judgment: [1]**")
    assert first_judgment("Judgment: [3]", 1)[0] is None  # out of range
    assert strip_partial_judgment("analysis here\n**Judgm") == "analysis here"
    assert strip_partial_judgment("analysis **Judgment: [7]**") == "analysis"
    assert strip_partial_judgment("analysis\n**") == "analysis"
    regex = constrained_regex(1)
    assert re.fullmatch(regex, "Both fine.\n**Judgment: [1]**")
    assert not re.fullmatch(regex, "Both.\n**Judgment: [2]**")
    assert not re.fullmatch(regex, "**Judgment: [0]**\nmore **Judgment: [1]**")


class FakeVllm:
    """``generate_constrained`` like the vLLM backend: one greedy Sample per prompt."""

    def __init__(self, outputs: list[str]):
        self.tokenizer, self.outputs, self.calls = None, list(outputs), []

    def generate_constrained(self, prompts, regex, max_tokens=64):
        self.calls.append((list(prompts), regex, max_tokens))
        return [Sample(i, 0, self.outputs.pop(0), [], "stop") for i in range(len(prompts))]


def test_llm_judge_vllm_route_forces_truncated_verdicts(monkeypatch) -> None:
    backend = FakeVllm(["Zero is cleaner.\n**Judgment: [0]**", "Solution 1 is long and cut",
                        "1]**"])
    judge = LlmJudge(backend, instruct=True, max_new_tokens=32)
    monkeypatch.setattr(judge, "prompt", lambda r: "PROMPT ")
    req = JudgeRequest("chain_sum", chain_sum_problem("1 + 2"), ("a", "b"))
    v1, v2 = judge.judge([req, req])
    assert (v1.choice, v1.forced) == (0, False)
    assert (v2.choice, v2.forced) == (1, True)
    first, second = backend.calls
    assert first[1] == constrained_regex(1) and first[2] == 32
    assert second[0] == ["PROMPT Solution 1 is long and cut\n\n**Judgment: ["]


class _Tok:
    chat_template = None


def test_plain_rendering_without_template() -> None:
    msgs = judge_messages("chain_sum", chain_sum_problem("1 + 2"), ["a", "b"], instruct=False)
    text = render_judge_prompt(_Tok(), msgs)
    assert text == msgs[0]["content"] + "\n" and text.rstrip().endswith("### EVALUATION")


@pytest.fixture(scope="module")
def noisy_backend(tiny_model_dir: Path) -> TransformersBackend:
    """The tiny model with larger random weights, so greedy outputs vary across prompts."""
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=3)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in backend.model.parameters():
            p.normal_(0, 0.3)
    return backend


def test_cached_prefix_greedy_equals_plain_greedy(noisy_backend: TransformersBackend) -> None:
    b = noisy_backend
    shared = "Compute the following step by step:\n1 + 2 - 1 = Judgment"
    prompts = [b.render(shared + x) for x in [" 3", " 4 + 5 + 6 - 2", " 7 - 1", "[0] 8"]]
    builds = getattr(b, "prefix_cache_builds", 0)
    cached = b.greedy_shared_prefix(prompts, 10)
    assert getattr(b, "prefix_cache_builds", 0) == builds + 1  # one prefix pass for 4 prompts
    plain = b.sample(prompts, SamplingParams(n=1, temperature=0, max_new_tokens=10))
    for p, (tokens, _), ref in zip(prompts, cached, plain, strict=True):
        ids = torch.tensor([b.encode_prompt(p)])
        out = b.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                               generation_config=b._generation_config(
                                   SamplingParams(n=1, temperature=0, max_new_tokens=10)))
        assert out[0, ids.shape[1]:].tolist()[: len(tokens)] == tokens
        assert ref[0].token_ids == tokens
    cands = [10, 11, 12, 50]
    picks = b.choose_next_token(prompts, cands)
    for p, pick in zip(prompts, picks, strict=True):
        logits = b.model(input_ids=torch.tensor([b.encode_prompt(p)])).logits[0, -1]
        assert pick == int(logits[cands].argmax())


@pytest.mark.parametrize("instruct", [True, False])
def test_llm_judge_transformers_route_always_decides(noisy_backend: TransformersBackend,
                                                     instruct: bool) -> None:
    judge = LlmJudge(noisy_backend, instruct=instruct, max_new_tokens=6, batch_size=4)
    result = run_tournament(_selection(), judge, "self_judge")
    s = result.summary
    assert s["judge_calls"] == 24 and s["parse_failures"] == 0
    # a random model never writes "Judgment: [N]": every verdict is forced, and counted
    assert s["forced_judgments"] == 24
    assert result.comparisons["choice"].isin([0, 1]).all()
    assert result.comparisons["judge_output"].str.contains(r"Judgment: \[[01]\]\*\*").all()
