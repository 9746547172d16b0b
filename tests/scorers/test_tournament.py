"""Pair scheduling, win rates, judges (fake, rubric, LLM on a tiny model)."""

from collections.abc import Sequence
from math import comb
from pathlib import Path

import polars as pl
import pytest
import regex
import torch
from polars.testing import assert_frame_equal
from tokenizers import AddedToken
from transformers import LlamaConfig, LlamaForCausalLM

from saturated_dag.generation.base import Sample, SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.infra.shards import ShardStore
from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.judges import (
    FORCE_TAIL,
    JudgeRequest,
    LlmJudge,
    RubricJudge,
    Verdict,
    chain_sum_expression,
    first_judgment,
    force_tail,
    forced_text,
    judgment_stop,
    judgment_stops,
    render_judge_prompt,
)
from saturated_dag.scorers.scored_completions import SCORE_COLUMNS, completions_to_score
from saturated_dag.scorers.tournament import (
    COMPARISON_SCHEMA,
    expected_calls,
    run_tournament,
    schedule_pairs,
)
from saturated_dag.tasks.prompts import chain_sum_problem
from tests.scoring_data import make_partitions, make_pool
from tests.tiny_models import build_tokenizer

JOHN_SCRIPT = ("John", " asks", " the **Judge**", " whether", " Judgment: [2]", " counts.",
               " Janet", " says no.", "\n\n", "**Judgment: [", "1", "]**", "\n\n## EVALUATION B")
"""A judge's greedy output, one token a piece: an analysis that names John and Janet, bolds
"**Judge**" and holds an out-of-range judgment, then a valid one, then the text a base model
would run on with. Everything up to ``]**`` is what the verdict must keep unchanged."""
JOHN_VERDICT = "".join(JOHN_SCRIPT[:12])
JOHN_CUT = 4
"""A token budget that ends the analysis after " whether": the index is then forced."""
JOHN_FORCED = "John asks the **Judge** whether\n\n**Judgment: [1]**"
JOHN_CASES = [(32, 1, False, JOHN_VERDICT), (JOHN_CUT, 1, True, JOHN_FORCED)]
"""(token budget, choice, forced, verdict text): the judge stops at the first valid judgment,
or the budget ends the analysis and the index is forced."""


def build_scripted_model(folder: Path, script: Sequence[str] = JOHN_SCRIPT,
                         start: str = "<|assistant|>") -> Path:
    """A 2-layer Llama whose greedy output after ``start`` is ``script``, then EOS.

    Why: a judge test needs an output it controls, on the real backends (transformers and
    vLLM) and their real stop rules. Each piece is its own token (added to the tiny
    tokenizer); attention and MLP write nothing, so the next token depends on the last one
    only: ``start`` -> piece 0 -> piece 1 ... -> EOS, and any token outside the script -> EOS,
    with the index ``1`` preferred to ``0`` (a forced index is 1; after ``**Judgment: [`` the
    script says 1 as well). Hidden 64 and head size 32 suit vLLM's CPU kernels.
    """
    tokenizer = build_tokenizer(chat_template=True)
    tokenizer.add_tokens([AddedToken(p, normalized=False, special=False)
                          for p in script if len(tokenizer.tokenize(p)) > 1])
    ids = [tokenizer.convert_tokens_to_ids(start)]
    for piece in script:
        encoded = tokenizer(piece, add_special_tokens=False)["input_ids"]
        assert len(encoded) == 1, f"piece {piece!r} is not one token"
        ids.append(encoded[0])
    assert len(set(ids)) == len(ids), "a piece repeats: the next token would be ambiguous"
    hidden = 64
    assert len(ids) < hidden
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    eos, one = tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("1")
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.zero_()
        head.zero_()
        embed[:, 0] = 1.0  # every token outside the script: direction 0
        head[eos, 0], head[one, 0] = 1.0, 0.5
        for k, (token, following) in enumerate(zip(ids, [*ids[1:], eos], strict=True)):
            embed[token] = 0.0
            embed[token, k + 1] = 1.0  # one direction per scripted token
            head[following, k + 1] = 1.0
    model.config.architectures = ["LlamaForCausalLM"]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _selection():
    pool = make_pool()
    return completions_to_score(pool, make_partitions(pool), ["saturated", "strict_saturated"],
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
    for _qid, group in scores.group_by("question_id"):
        # a strict order by length: win rates are 0, 1/3, 2/3, 1
        assert sorted(group["score"].round(4)) == [0.0, 0.3333, 0.6667, 1.0]
    assert result.comparisons.height == 24
    assert result.summary["parse_failures"] == 0


def test_both_orders_cancels_position_bias() -> None:
    sel = _selection()
    biased = run_tournament(sel, LongerWins(always_first=True), "fake")
    assert biased.scores["score"].n_unique() > 1
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
    assert result.comparisons["choice"].null_count() == 6


def test_frames_layout_dtypes_and_order() -> None:
    """Scores in ``selection.groups()`` order (questions sorted, then sample index) with the
    counts as Int64 and wins as Float64; comparisons per question in scheduling order, a
    failed verdict a null ``choice`` in an Int64 column."""
    sel = _selection()
    result = run_tournament(sel, LongerWins(fail_every=4), "fake")
    scores, comparisons = result.scores, result.comparisons
    assert scores.columns == [*SCORE_COLUMNS, "wins", "comparisons", "parse_failures",
                              "forced_judgments"]
    assert scores.schema["wins"] == pl.Float64 and scores.schema["comparisons"] == pl.Int64
    assert scores.schema["parse_failures"] == scores.schema["forced_judgments"] == pl.Int64
    assert scores.select("question_id", "sample_index").rows() == [
        (q, i) for q, _, rows in sel.groups() for i in rows["sample_index"]]
    assert comparisons.schema == pl.Schema(COMPARISON_SCHEMA)
    assert comparisons.select("first", "second").rows() == [
        (a, b) for _ in range(4) for a, b in schedule_pairs(4)]
    assert comparisons["choice"].to_list()[:4] == [1, 1, 1, None]
    decided = comparisons["choice"].drop_nulls().to_list()
    assert len(decided) == 18 and result.summary["parse_failures"] == 6
    assert result.summary["first_position_win_rate"] == decided.count(0) / 18


def test_sharded_tournament_equals_one_pass_and_reuses_its_shards(tmp_path: Path) -> None:
    sel = _selection()
    whole = run_tournament(sel, LongerWins(fail_every=4), "fake")
    store = ShardStore(tmp_path / "stage", "k")
    sharded = run_tournament(sel, LongerWins(fail_every=4), "fake", store=store, shard_size=3)
    assert store.last_stats is not None and store.last_stats.shards_computed == 2
    judge = LongerWins(fail_every=4)
    reused = run_tournament(sel, judge, "fake", store=store, shard_size=3)
    assert judge.calls == 0 and store.last_stats.cache == "hit"
    for result in (sharded, reused):
        assert_frame_equal(result.scores, whole.scores)
        assert_frame_equal(result.comparisons, whole.comparisons)
        assert result.summary == whole.summary


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
    assert ties.scores["score"].is_between(0, 1).all()
    assert ties.summary["ties"] == ties.comparisons["tie"].sum() > 0


def test_judgment_parsing_helpers() -> None:
    assert judgment_stops(1) == ["Judgment: [0]", "Judgment: [1]"]
    assert first_judgment("ok\n**Judgment: [1]**\n---\n## EVALUATION C", 1) == (
        1, "ok\n**Judgment: [1]**")
    assert first_judgment("Judgment: [3]", 1) == (None, "Judgment: [3]")  # out of range
    # an out-of-range judgment is analysis: the first valid one after it is the verdict
    assert first_judgment("J: Judgment: [3] then Judgment: [0]. More", 1) == (
        0, "J: Judgment: [3] then Judgment: [0]")
    assert first_judgment("Judgment: [10]", 1)[0] is None
    assert first_judgment("x Judgment: [10]", 10)[0] == 10
    stop = judgment_stop(1)
    assert not stop("John, the **Judge**, says Judgment: [2]") and stop("... Judgment: [1]")
    with pytest.raises(ValueError, match="at least two solutions"):
        judgment_stops(0)


@pytest.mark.parametrize(("analysis", "tail"), [
    ("", FORCE_TAIL),
    ("Janet is right.", "\n\n" + FORCE_TAIL),
    ("Janet is right.\n", "\n" + FORCE_TAIL),
    ("Ask the **Judge**", "\n\n" + FORCE_TAIL),  # bold that only looks like a marker
    ("Ask the **Judge", "\n\n" + FORCE_TAIL),
    ("So **Judgment: [7]**", "\n\n" + FORCE_TAIL),  # out of range: kept, a new verdict
    ("analysis here\n**Judgm", "ent: ["),  # the budget ran out inside the marker
    ("analysis\n**", "Judgment: ["),
    ("analysis\n**Judgment: [", ""),
    ("analysis. Judgment:", " ["),
    ("analysis Judg", "ment: ["),
    ("John J", "\n\n" + FORCE_TAIL),
])
def test_force_tail_never_cuts_the_analysis(analysis: str, tail: str) -> None:
    assert force_tail(analysis) == tail
    text = forced_text(analysis, 1)
    bold = (analysis + tail).endswith(FORCE_TAIL)
    assert text == analysis + tail + ("1]**" if bold else "1]")
    assert first_judgment(text, 1) == (1, text)


class ScriptedVllm:
    """The calls the judge makes on ``VllmBackend``, over a scripted greedy model.

    Free generation (``greedy_until``) writes ``pieces`` one token each and stops as vLLM
    does: after the token that completes a stop string (kept), at the script's end (EOS) or
    after ``max_tokens``. Structured outputs (``generate_constrained``) may not change what
    the model writes: a regex that the scripted text cannot match raises, where a real engine
    would silently rewrite the analysis. After ``Judgment: [`` the model says ``pick``.
    """

    def __init__(self, pieces: Sequence[str], pick: str = "1"):
        self.tokenizer, self.pieces, self.pick = _Tok(), list(pieces), pick
        self.calls: list[tuple[str, list[str], object, int]] = []

    def greedy_until(self, prompts, stop, max_tokens):
        self.calls.append(("free", list(prompts), list(stop), max_tokens))
        return [self._free(i, stop, max_tokens) for i in range(len(prompts))]

    def _free(self, i: int, stop: Sequence[str], max_tokens: int) -> Sample:
        text = ""
        for k, piece in enumerate(self.pieces):
            if k == max_tokens:
                return Sample(i, 0, text, [], "length")
            text += piece
            if any(s in text for s in stop):
                break
        return Sample(i, 0, text, [], "stop")

    def generate_constrained(self, prompts, regex_text, max_tokens=64):
        self.calls.append(("constrained", list(prompts), regex_text, max_tokens))
        out = []
        for i, prompt in enumerate(prompts):
            text = self.pick if prompt.endswith("Judgment: [") else self._free(
                i, [], max_tokens).text
            if regex.fullmatch(regex_text, text, partial=True) is None:
                raise AssertionError(f"the constraint {regex_text!r} rewrites the judge's "
                                     f"own text {text!r}")
            out.append(Sample(i, 0, text, [], "stop"))
        return out


def john_request() -> JudgeRequest:
    return JudgeRequest("gsm8k", "John and Janet have 3 apples. How many?", ("3", "\\boxed{3}"))


@pytest.mark.parametrize(("budget", "choice", "forced", "text"), JOHN_CASES,
                         ids=["stops", "forced"])
def test_vllm_route_keeps_the_analysis(budget: int, choice: int, forced: bool,
                                       text: str) -> None:
    """"John", "**Judge**" and an out-of-range judgment pass through unchanged; generation
    stops at the first valid judgment, or the index alone is constrained after the budget."""
    backend = ScriptedVllm(JOHN_SCRIPT)
    judge = LlmJudge(backend, instruct=False, max_new_tokens=budget)
    (verdict,) = judge.judge([john_request()])
    assert (verdict.choice, verdict.forced, verdict.text) == (choice, forced, text)
    free = backend.calls[0]
    assert free[0] == "free" and free[2] == ["Judgment: [0]", "Judgment: [1]"]
    assert free[3] == budget
    if forced:
        kind, prompts, index_regex, max_tokens = backend.calls[1]
        assert (kind, index_regex, max_tokens) == ("constrained", "(0|1)", 2)
        assert prompts[0].endswith("\nJohn asks the **Judge** whether\n\n**Judgment: [")
    else:
        assert len(backend.calls) == 1


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
    assert result.comparisons["choice"].is_in([0, 1]).all()
    assert result.comparisons["judge_output"].str.contains(r"Judgment: \[[01]\]").all()


@pytest.fixture(scope="module")
def scripted_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_model(tmp_path_factory.mktemp("scripted") / "model")


def test_scripted_model_writes_its_script(scripted_dir: Path) -> None:
    backend = TransformersBackend.load(str(scripted_dir))
    (row,) = backend.sample([backend.render("any question")],
                            SamplingParams(n=1, temperature=0, max_new_tokens=20))
    assert row[0].text == "".join(JOHN_SCRIPT) and row[0].finish_reason == "stop"


@pytest.mark.parametrize(("budget", "choice", "forced", "text"), JOHN_CASES,
                         ids=["stops", "forced"])
def test_transformers_route_keeps_the_analysis(scripted_dir: Path, budget: int, choice: int,
                                               forced: bool, text: str) -> None:
    """On the real backend: the analysis with "John", "**Judge**" and an out-of-range
    judgment is the verdict text unchanged; generation stops at the first valid judgment
    (not at ``Judgment: [2]``), or the index is forced after the unchanged analysis."""
    backend = TransformersBackend.load(str(scripted_dir))
    judge = LlmJudge(backend, instruct=True, max_new_tokens=budget)
    verdicts = judge.judge([john_request(), john_request()])
    assert [(v.choice, v.forced, v.text) for v in verdicts] == [(choice, forced, text)] * 2
