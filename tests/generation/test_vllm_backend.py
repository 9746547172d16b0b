"""The vLLM backend on a tiny random-weight Llama (runs only where vLLM imports: .venv-vllm).

One engine start (about a minute on CPU) serves every test in this module. The model is built
here rather than with ``build_tiny_model`` so that (a) its head size suits vLLM's CPU attention
kernels and (b) EOS is likely enough that samples end both by EOS and by the token limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "vllm", reason="vLLM is not installed here; build its env with `bash .ci/vllm_env.sh`"
)

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from saturated_dag.generation import open_backend
from saturated_dag.generation.base import GenerationBackend, SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.generation.vllm_backend import VllmBackend
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt
from tests.tiny_models import build_tokenizer

EOS_LOGIT = 3.2  # other logits spread ~1: P(EOS) ~ 0.05-0.1 a step at T=0.6; greedy stops after 4
JUDGMENT = r"Judgment: \[[01]\]"
GREEDY_EXPRESSIONS = ("1 + 2", "3 + 4 - 5", "7 - 9", "12 + 30", "5 + 5 + 5", "0 - 8")


def build_vllm_tiny_model(folder: Path, seed: int = 0, max_positions: int = 512) -> Path:
    """A 2-layer Llama with head size 32 whose next token is EOS 5-10% of the time.

    A constant residual feature (column 0 of the embeddings) survives RMSNorm as about
    sqrt(hidden); the untied LM head reads it only in the EOS row, so EOS gets a fixed logit
    while the other tokens get random logits of spread ~1 (greedy is then not trivially EOS).
    """
    tokenizer = build_tokenizer(chat_template=True)
    hidden = 64
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 1.0
        head = model.lm_head.weight
        head.normal_(0.0, 0.4)
        head[:, 0] = 0.0
        head[eos] = 0.0
        head[eos, 0] = EOS_LOGIT / hidden**0.5
    model.config.architectures = ["LlamaForCausalLM"]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_vllm_tiny_model(tmp_path_factory.mktemp("vllm_tiny") / "model")


def open_tiny_engine(model_dir: Path, seed: int = 1234, **options: object) -> VllmBackend:
    """A CPU engine for a tiny test model, opened the way the pipeline opens one."""
    opened = open_backend("vllm", str(model_dir), dtype="float32", seed=seed, vllm_options={
        "gpu_memory_utilization": 0.5, "enforce_eager": True, "max_model_len": 256,
        "tensor_parallel_size": 1, "enable_prefix_caching": True, **options})
    assert isinstance(opened, VllmBackend)
    return opened


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> Iterator[VllmBackend]:
    """The one engine of this module."""
    opened = open_tiny_engine(model_dir)
    yield opened
    opened.close()
    assert opened.llm is None


def _prompts(backend: GenerationBackend) -> list[str]:
    return [backend.render(policy_prompt(chain_sum_problem(e))) for e in ("1 + 2", "3 + 4 - 5")]


def test_is_a_generation_backend(backend: VllmBackend) -> None:
    assert isinstance(backend, GenerationBackend)
    assert backend.name == "vllm"
    rendered = backend.render("hi")
    assert rendered.startswith("<|user|>hi<|end|>") and rendered.endswith("<|assistant|>")
    ids = backend.encode_prompt(rendered)
    assert ids.count(backend.tokenizer.bos_token_id) == 0  # the template adds no BOS: none here


def test_samples_shape_eos_and_limits(backend: VllmBackend) -> None:
    prompts = _prompts(backend)
    params = SamplingParams(n=8, temperature=0.6, top_p=0.95, max_new_tokens=16)
    calls: list[tuple[int, int]] = []
    result = backend.sample(
        prompts, params, progress=lambda done, total: calls.append((done, total))
    )
    eos = backend.tokenizer.eos_token_id
    assert len(result) == len(prompts)
    reasons = set()
    for i, row in enumerate(result):
        assert len(row) == params.n
        for j, sample in enumerate(row):
            assert (sample.prompt_index, sample.sample_index) == (i, j)
            assert 1 <= sample.num_tokens <= params.max_new_tokens
            assert sample.mean_entropy is None
            reasons.add(sample.finish_reason)
            if sample.finish_reason == "stop":
                assert sample.token_ids[-1] == eos
                assert eos not in sample.token_ids[:-1]
            else:
                assert sample.finish_reason == "length"
                assert sample.num_tokens == params.max_new_tokens
                assert eos not in sample.token_ids
            expected = backend.tokenizer.decode(sample.token_ids, skip_special_tokens=True)
            assert sample.text == expected
    assert "stop" in reasons  # P(EOS) ~ 0.05-0.1 a step, 16 steps, 16 samples
    total = len(prompts) * params.n
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_token_limit_ends_with_length(backend: VllmBackend) -> None:
    result = backend.sample(_prompts(backend), SamplingParams(n=4, max_new_tokens=1))
    eos = backend.tokenizer.eos_token_id
    for sample in (s for row in result for s in row):
        assert sample.num_tokens == 1
        assert sample.finish_reason == ("stop" if sample.token_ids == [eos] else "length")


def test_greedy_matches_transformers(backend: VllmBackend, model_dir: Path) -> None:
    """Same rendered prompt, same tokens in, so the same greedy tokens out (float32)."""
    reference = TransformersBackend.load(str(model_dir))
    prompts = [backend.render(policy_prompt(chain_sum_problem(e))) for e in GREEDY_EXPRESSIONS]
    assert [reference.encode_prompt(p) for p in prompts] == [
        backend.encode_prompt(p) for p in prompts
    ]
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=12)
    ours = [row[0] for row in backend.sample(prompts, params)]
    theirs = [row[0] for row in reference.sample(prompts, params)]
    for a, b in zip(ours, theirs, strict=True):
        assert (a.token_ids, a.finish_reason, a.text) == (b.token_ids, b.finish_reason, b.text)


def test_generate_constrained_matches_regex(backend: VllmBackend) -> None:
    prompts = [backend.render(chain_sum_problem("1 + 2") + "\nJudge it.")] * 2
    outputs = backend.generate_constrained(prompts, JUDGMENT, max_tokens=24)
    assert len(outputs) == 2
    for sample in outputs:
        assert re.fullmatch(JUDGMENT, sample.text), sample.text
        assert sample.finish_reason == "stop"
        assert sample.token_ids[-1] == backend.tokenizer.eos_token_id
    assert outputs[0].token_ids == outputs[1].token_ids  # greedy


def test_closed_backend_refuses(model_dir: Path, backend: VllmBackend) -> None:
    closed = VllmBackend(None, backend.tokenizer, backend.eos_ids)
    closed.close()  # closing twice (or a never-started engine) is harmless
    with pytest.raises(RuntimeError, match="closed"):
        closed.sample(["x"], SamplingParams(n=1, max_new_tokens=1))
