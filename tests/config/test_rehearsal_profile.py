"""The ``rehearsal`` profile: the paper profile's structure on tiny random-weight Qwen3 models.

Its end-to-end run needs vLLM (``scripts/rehearsal_job.sh`` in ``.venv-vllm``, from
``.ci/run``); these tests check, offline and fast, that it is the paper's structure, that its
models are the paper's architectures with a Qwen-style tokenizer, and that its coin is
confined to rehearsals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from saturated_dag.config import ProfileError
from saturated_dag.generation.rehearsal_models import (
    ENDOFTEXT,
    IM_END,
    JUDGE,
    POLICY,
    rehearsal_model_dir,
)
from saturated_dag.profiles import load_profile, parse_profile
from saturated_dag.tasks.verification import READING_CHECKS, coin_rate, verify_answer


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rehearsal_cache")


@pytest.fixture()
def models(cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("SATURATED_DAG_CACHE", str(cache))
    return {kind: rehearsal_model_dir(kind) for kind in (POLICY, JUDGE)}


@pytest.mark.parametrize(("ours", "theirs"), [("rehearsal", "paper"),
                                             ("rehearsal_instruct", "paper_instruct")])
def test_rehearsals_have_their_paper_profiles_code_paths(ours: str, theirs: str) -> None:
    """Every setting that picks a code path is the paper profile's; sizes and the coin differ."""
    rehearsal, paper = load_profile(ours), load_profile(theirs)
    assert rehearsal.tasks == paper.tasks
    same = {"backend", "dtype", "chat_template", "instruct", "kind", "enable_thinking"}
    for section in ("policy", "judges"):
        mine, orig = getattr(rehearsal, section).model_dump(), getattr(paper, section).model_dump()
        if section == "judges":
            assert mine["self_judge"] == orig["self_judge"]
            mine, orig = mine["strong"], orig["strong"]
        assert {k: v for k, v in mine.items() if k in same} == \
            {k: v for k, v in orig.items() if k in same}
    for key in ("enable_lora", "max_lora_rank", "max_loras"):
        assert getattr(rehearsal.policy.vllm, key) == getattr(paper.policy.vllm, key)
    assert rehearsal.scoring.model_dump(exclude={"judge_max_new_tokens"}) == \
        paper.scoring.model_dump(exclude={"judge_max_new_tokens"})
    t, p = rehearsal.training, paper.training
    assert t.splits == p.splits and t.methods == p.methods
    assert rehearsal.gsm8k.train_splits == paper.gsm8k.train_splits
    assert rehearsal.policy.vllm.max_model_len == paper.policy.vllm.max_model_len == "auto"
    assert (t.isolate, t.dtype, t.gradient_checkpointing) == (p.isolate, p.dtype,
                                                              p.gradient_checkpointing)
    assert (t.sweeps.rank_weight is None) == (p.sweeps.rank_weight is None)
    assert (t.sweeps.rrhf_variants is None) == (p.sweeps.rrhf_variants is None)
    assert (t.sweeps.dpo_beta is None) == (p.sweeps.dpo_beta is None)
    assert rehearsal.sampling.n == paper.sampling.n
    assert rehearsal.answer_check == "rehearsal_coin"


def test_the_paper_rehearsal_covers_its_selection_and_both_judge_kinds() -> None:
    rehearsal = load_profile("rehearsal")
    assert rehearsal.judges.self_judge.instruct is False  # the few-shot base self-judge
    assert rehearsal.judges.strong.backend == "vllm" and rehearsal.judges.strong.instruct
    betas = rehearsal.training.selection.dpo_betas
    assert betas is not None and len(betas) > 1  # the selection's path
    assert set(rehearsal.training.scorers) >= {"self_judge", "strong_judge"}


def test_models_are_the_papers_architectures_with_a_qwen_style_tokenizer(
        models: dict[str, Path]) -> None:
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    policy, judge = (AutoConfig.from_pretrained(models[k]) for k in (POLICY, JUDGE))
    assert policy.architectures == ["Qwen3ForCausalLM"] and policy.tie_word_embeddings
    assert judge.architectures == ["Qwen3MoeForCausalLM"] and not judge.tie_word_embeddings
    assert judge.num_experts > judge.num_experts_per_tok > 1
    assert policy.head_dim == 32  # vLLM's CPU attention refuses 16
    tok = AutoTokenizer.from_pretrained(models[POLICY])
    assert tok.bos_token is None and tok.eos_token == IM_END and tok.pad_token == ENDOFTEXT
    stops = GenerationConfig.from_pretrained(models[POLICY]).eos_token_id
    assert stops == [tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(ENDOFTEXT)]
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    off = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True,
                                  enable_thinking=False)
    assert off == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                   "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    on = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert on.endswith("<|im_start|>assistant\n")
    ids = tok(off, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids(IM_END)) == 2  # one token each, not bytes
    text = "Janet’s ducks lay 16 eggs per day. 😀"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level: any text round-trips


def test_judges_see_the_prompts_the_paper_profile_sends(models: dict[str, Path]) -> None:
    """The strong judge through its ChatML template with thinking off; the self-judge (the
    base policy, ``instruct: false``) the few-shot text without a template."""
    from transformers import AutoTokenizer

    from saturated_dag.scorers.judge_prompts import judge_messages
    from saturated_dag.scorers.judges import render_judge_prompt

    profile = load_profile("rehearsal")
    judge_tok = AutoTokenizer.from_pretrained(models[JUDGE])
    strong = render_judge_prompt(judge_tok, judge_messages("gsm8k", "Q?", ["a", "b"], True),
                                 profile.judges.strong.chat_template)
    assert strong.startswith("<|im_start|>system\n")
    assert strong.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    policy_tok = AutoTokenizer.from_pretrained(models[POLICY])
    few_shot = render_judge_prompt(policy_tok, judge_messages("gsm8k", "Q?", ["a", "b"], False),
                                   profile.policy.chat_template)
    assert "<|im_start|>" not in few_shot and "<think>" not in few_shot


def test_models_are_built_once_and_identically(models: dict[str, Path], cache: Path) -> None:
    weights = models[POLICY] / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert rehearsal_model_dir(POLICY) == models[POLICY]
    assert weights.stat().st_mtime_ns == before
    from saturated_dag.generation.models import resolve

    assert resolve("rehearsal-qwen3-moe").location == str(models[JUDGE])
    with pytest.raises(ValueError, match="unknown rehearsal model"):
        rehearsal_model_dir("rehearsal-llama")


def test_the_coin_adds_to_math_verify_and_is_deterministic() -> None:
    assert verify_answer("so \\boxed{12}", "12", "rehearsal_coin").correct  # read, not drawn
    golds = [str(g) for g in range(400)]
    rates = [coin_rate(g) for g in golds]
    assert set(rates) == {0.0, 0.125, 0.5, 1.0}
    assert 0.3 < rates.count(1.0) / len(rates) < 0.5
    for gold, rate in zip(golds[:50], rates[:50], strict=True):
        texts = ["noise " + "x" * k for k in range(40)]  # no number Math-Verify could read
        marks = [verify_answer(t, gold, "rehearsal_coin").correct for t in texts]
        assert marks == [verify_answer(t, gold, "rehearsal_coin").correct for t in texts]
        if rate in (0.0, 1.0):
            assert set(marks) == {bool(rate)}
    assert "rehearsal_coin" not in READING_CHECKS  # dataset loaders never test golds with it


def test_every_rehearsal_table_says_its_numbers_measure_nothing() -> None:
    from saturated_dag.data.questions import eval_set_name
    from saturated_dag.tasks.verification import REHEARSAL_CAVEAT

    rehearsal, paper = load_profile("rehearsal"), load_profile("paper")
    assert eval_set_name(rehearsal, "gsm8k", 4).endswith(REHEARSAL_CAVEAT)
    assert "coin" not in eval_set_name(paper, "gsm8k", 4)


def test_the_coin_is_refused_outside_rehearsals() -> None:
    raw = load_profile("demo").model_dump(mode="json")
    with pytest.raises(ProfileError, match="rehearsal profiles only"):
        parse_profile({**raw, "answer_check": "rehearsal_coin"}, "test")
    parse_profile({**raw, "name": "rehearsal_small", "answer_check": "rehearsal_coin"}, "test")
