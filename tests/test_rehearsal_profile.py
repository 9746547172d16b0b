"""The ``rehearsal`` profile: the paper profile's structure on tiny random-weight Qwen3 models.

Its end-to-end run needs vLLM (``scripts/rehearsal_job.sh`` in ``.venv-vllm``, from
``.ci/run``); these tests check, offline and fast, that it is the paper's structure, that its
models are the paper's architectures with a Qwen-style tokenizer, and that its coin is
confined to rehearsals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from saturated_dag.config import ProfileError, load_profile, parse_profile
from saturated_dag.generation.rehearsal_models import (
    ENDOFTEXT,
    IM_END,
    JUDGE,
    POLICY,
    rehearsal_model_dir,
)
from saturated_dag.verification import READING_CHECKS, coin_rate, verify_answer


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rehearsal_cache")


@pytest.fixture()
def models(cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("SATURATED_DAG_CACHE", str(cache))
    return {kind: rehearsal_model_dir(kind) for kind in (POLICY, JUDGE)}


def test_rehearsal_has_the_paper_profiles_code_paths() -> None:
    """Every setting that picks a code path is the paper's; sizes and the coin differ."""
    paper, rehearsal = load_profile("paper"), load_profile("rehearsal")
    assert rehearsal.tasks == paper.tasks == ["chain_sum", "gsm8k"]
    for section in ("policy", "judges"):
        ours, theirs = getattr(rehearsal, section), getattr(paper, section)
        same = {"backend", "dtype", "chat_template", "instruct", "kind", "enable_thinking"}
        assert ({k: v for k, v in ours.model_dump().items() if k in same}
                == {k: v for k, v in theirs.model_dump().items() if k in same})
    assert rehearsal.judges.self_judge.instruct is False
    assert rehearsal.judges.strong.backend == "vllm" and rehearsal.judges.strong.instruct
    assert rehearsal.policy.vllm.enable_lora and rehearsal.policy.vllm.max_loras > 1
    assert rehearsal.policy.vllm.max_lora_rank == paper.policy.vllm.max_lora_rank
    assert rehearsal.scoring.model_dump(exclude={"judge_max_new_tokens"}) == \
        paper.scoring.model_dump(exclude={"judge_max_new_tokens"})
    t, p = rehearsal.training, paper.training
    assert set(t.splits) == set(p.splits) and set(t.methods) == set(p.methods)
    assert t.isolate and t.dtype == p.dtype and t.gradient_checkpointing
    assert t.selection.dpo_betas and len(t.selection.dpo_betas) > 1
    assert t.sweeps.rank_weight and t.sweeps.rrhf_variants and t.sweeps.dpo_beta
    assert rehearsal.sampling.n == paper.sampling.n
    assert rehearsal.answer_check == "rehearsal_coin"


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
    from saturated_dag.tasks import eval_set_name
    from saturated_dag.verification import REHEARSAL_CAVEAT

    rehearsal, paper = load_profile("rehearsal"), load_profile("paper")
    assert eval_set_name(rehearsal, "gsm8k", 4).endswith(REHEARSAL_CAVEAT)
    assert "coin" not in eval_set_name(paper, "gsm8k", 4)


def test_the_coin_is_refused_outside_rehearsals() -> None:
    raw = load_profile("demo").model_dump(mode="json")
    with pytest.raises(ProfileError, match="rehearsal profiles only"):
        parse_profile({**raw, "answer_check": "rehearsal_coin"}, "test")
    parse_profile({**raw, "name": "rehearsal_small", "answer_check": "rehearsal_coin"}, "test")
