from pathlib import Path

import pytest
import torch

from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.entropy import teacher_forced_mean_entropy, token_entropy
from saturated_dag.generation.transformers_backend import TransformersBackend

PROMPTS = ["Compute the following step by step:\n1 + 2 =", "Natalia sold clips. How many?"]


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> TransformersBackend:
    return TransformersBackend.load(str(tiny_model_dir), batch_size=3)


def _sample(backend: TransformersBackend, **kw: object) -> list:
    params = SamplingParams(**{"n": 4, "max_new_tokens": 12, "seed": 3, **kw})
    return backend.sample([backend.render(p) for p in PROMPTS], params)


def test_shapes_and_stop_reasons(backend: TransformersBackend) -> None:
    seen: list[tuple[int, int]] = []
    params = SamplingParams(n=4, max_new_tokens=12, seed=3)
    out = backend.sample([backend.render(p) for p in PROMPTS], params,
                         progress=lambda d, t: seen.append((d, t)))
    assert [len(group) for group in out] == [4, 4]
    for i, group in enumerate(out):
        for j, sample in enumerate(group):
            assert (sample.prompt_index, sample.sample_index) == (i, j)
            assert 1 <= sample.num_tokens <= 12
            if sample.finish_reason == "stop":
                assert sample.token_ids[-1] in backend.eos_ids
            else:
                assert sample.num_tokens == 12 and sample.finish_reason == "length"
    assert seen[-1] == (8, 8)


def test_same_seed_same_samples_other_seed_differs(backend: TransformersBackend) -> None:
    a, b, c = _sample(backend), _sample(backend), _sample(backend, seed=4)
    ids = lambda out: [s.token_ids for g in out for s in g]  # noqa: E731
    assert ids(a) == ids(b)
    assert ids(a) != ids(c)


def test_entropy_from_generation_matches_teacher_forcing(backend: TransformersBackend) -> None:
    prompts = [backend.render(p) for p in PROMPTS]
    out = backend.sample(prompts, SamplingParams(n=3, max_new_tokens=10, seed=1))
    for group in out:
        for sample in group:
            forced = teacher_forced_mean_entropy(
                backend.model, backend.encode_prompt(prompts[sample.prompt_index]),
                sample.token_ids, chunk=4)
            assert sample.mean_entropy == pytest.approx(forced, abs=1e-4)


def test_entropy_is_at_temperature_one_not_sampling_temperature(
    backend: TransformersBackend,
) -> None:
    hot = _sample(backend, temperature=1.0)[0][0]
    cold = _sample(backend, temperature=0.2)[0][0]
    prompt = backend.encode_prompt(backend.render(PROMPTS[0]))
    for sample in (hot, cold):
        forced = teacher_forced_mean_entropy(backend.model, prompt, sample.token_ids)
        assert sample.mean_entropy == pytest.approx(forced, abs=1e-4)


def test_greedy_is_deterministic_across_seeds(backend: TransformersBackend) -> None:
    a = _sample(backend, temperature=0.0, n=2, seed=1)
    b = _sample(backend, temperature=0.0, n=2, seed=9)
    assert [s.token_ids for g in a for s in g] == [s.token_ids for g in b for s in g]


def test_uniform_logits_have_log_vocab_entropy() -> None:
    assert token_entropy(torch.zeros(2, 50)).tolist() == pytest.approx([torch.log(
        torch.tensor(50.0)).item()] * 2)


def test_plain_prompt_for_base_model(tiny_base_model_dir: Path) -> None:
    base = TransformersBackend.load(str(tiny_base_model_dir))
    assert base.render("hello") == "hello"
    # Without a template the tokenizer's own special tokens (a BOS, for most base models) apply.
    assert not base.uses_chat_template
    assert base.encode_prompt("hello") == base.tokenizer("hello")["input_ids"]
