"""The continuous-batching sampler (``generation/decoder.py``) and the merged single adapter:
deterministic, each prompt prefilled once, batches kept full, and the distribution of plain
``generate``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.multi_lora import merged_adapter, merged_peft_lora
from saturated_dag.generation.transformers_backend import TransformersBackend

PROMPTS = ["alpha beta", "the answer is", "one two three four five six", "x", "hello"]


def _tokens(result: list[list[object]]) -> list[list[tuple[list[int], str]]]:
    return [[(s.token_ids, s.finish_reason) for s in row] for row in result]  # type: ignore[attr-defined]


def _forward_shapes(backend: TransformersBackend) -> list[tuple[int, int]]:
    """Record ``(rows, tokens)`` of every forward pass of the backend's model."""
    shapes: list[tuple[int, int]] = []
    model = backend.model
    original = model.forward

    def forward(*args: object, **kwargs: object) -> object:
        ids = kwargs["input_ids"]
        shapes.append((int(ids.shape[0]), int(ids.shape[1])))  # type: ignore[attr-defined]
        return original(*args, **kwargs)

    model.forward = forward
    return shapes


def _table(a: list[object], b: list[object], keys: list[object]) -> list[list[int]]:
    """Counts of ``keys`` in ``a`` and ``b``, the rest pooled into one column when any."""
    rest = [sum(x not in keys for x in a), sum(x not in keys for x in b)]
    return [[seq.count(k) for k in keys] + ([other] if any(rest) else [])
            for seq, other in ((a, rest[0]), (b, rest[1]))]


def _homogeneous(a: list[object], b: list[object]) -> float:
    """The p-value of a chi-square test that ``a`` and ``b`` come from one distribution
    (values seen fewer than 10 times pooled into one cell)."""
    from scipy.stats import chi2_contingency

    keys = [k for k in sorted({*a, *b}, key=repr) if a.count(k) + b.count(k) >= 10]
    return float(chi2_contingency(_table(a, b, keys)).pvalue)


def _plain_generate(backend: TransformersBackend, prompt: str, params: SamplingParams
                    ) -> list[list[int]]:
    """``params.n`` samples of ``prompt`` from ``model.generate`` (the same temperature,
    top-p, token limit and EOS), each cut after its EOS as the sampler's are."""
    ids = torch.tensor([backend.encode_prompt(prompt)])
    torch.manual_seed(params.seed)
    with torch.no_grad():
        out = backend.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
            temperature=params.temperature, top_p=params.top_p, top_k=None,
            max_new_tokens=params.max_new_tokens, num_return_sequences=params.n,
            eos_token_id=backend.eos_ids, pad_token_id=backend.tokenizer.pad_token_id)
    rows = []
    for row in out[:, ids.shape[1]:].tolist():
        ends = [i for i, token in enumerate(row) if token in backend.eos_ids]
        rows.append(row[: ends[0] + 1] if ends else row)
    return rows


def test_two_runs_give_the_same_samples(tiny_model_dir: Path) -> None:
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=7)
    params = SamplingParams(n=3, temperature=0.8, top_p=0.9, max_new_tokens=10, seed=3)
    first = backend.sample(PROMPTS, params)
    second = backend.sample(PROMPTS, params)
    assert first == second  # tokens, reasons and entropies, bit for bit
    other = backend.sample(PROMPTS, SamplingParams(n=3, temperature=0.8, top_p=0.9,
                                                   max_new_tokens=10, seed=4))
    assert _tokens(other) != _tokens(first)


def test_each_prompt_is_prefilled_once_and_the_batch_stays_full(tiny_model_dir: Path) -> None:
    """n samples share one prefill; while prompts wait, every decoding step runs every slot
    (a finished row's slot is refilled, not dropped)."""
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=8)
    shapes = _forward_shapes(backend)
    prompts = [f"{word} {k}" for k in range(6) for word in ("count", "sum up", "a")]
    params = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=1)
    result = backend.sample(prompts, params)
    assert sum(len(row) for row in result) == 4 * len(prompts)
    prefills = [rows for rows, tokens in shapes if tokens > 1]
    assert sum(prefills) == len(prompts)  # one prefilled row per prompt, not one per sample
    decodes = [rows for rows, tokens in shapes if tokens == 1]
    # Rows finish at different steps (EOS or the limit); the slots stay at 8 until the queue
    # is dry and a quarter of them are idle.
    assert decodes[: len(decodes) // 2] == [8] * (len(decodes) // 2)


def test_first_tokens_and_answers_follow_plain_generate(tiny_model_dir: Path) -> None:
    """Against ``model.generate`` (do_sample, the same temperature and top-p): the first
    token's distribution and the distribution of the first three tokens' text agree by a
    chi-square test of homogeneity (p > 1e-3) over 3,000 samples each."""
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=512)
    prompt = PROMPTS[1]
    params = SamplingParams(n=3000, temperature=0.7, top_p=0.8, max_new_tokens=3, seed=2)
    (ours,) = backend.sample([prompt], params)
    theirs = _plain_generate(backend, prompt, params)
    first_ours = [s.token_ids[0] for s in ours]
    first_theirs = [t[0] for t in theirs]
    assert len(set(first_ours)) > 3  # a real distribution, not one token
    assert _homogeneous(first_ours, first_theirs) > 1e-3
    assert _homogeneous([tuple(s.token_ids[:3]) for s in ours],
                        [tuple(t[:3]) for t in theirs]) > 1e-3
    # and the test can fail: another temperature is told apart
    (hot,) = backend.sample([prompt], SamplingParams(n=3000, temperature=1.5, top_p=1.0,
                                                     max_new_tokens=3, seed=2))
    assert _homogeneous([s.token_ids[0] for s in hot], first_theirs) < 1e-3


def test_answers_of_the_embedded_model_follow_plain_generate() -> None:
    """On the shipped arithmetic model with the demo profile's own policy settings (its
    slot count) and sampling settings, one chain-sum question: the distribution of the
    extracted answers of 600 samples is generate's (chi-square homogeneity, p > 1e-3)."""
    from dataclasses import replace

    from saturated_dag.data.questions import eval_questions
    from saturated_dag.profiles import load_profile
    from saturated_dag.tasks.verification import extract_last_boxed

    demo = load_profile("demo")
    backend = TransformersBackend.load(demo.policy.model, batch_size=demo.policy.batch_size)
    prompt = backend.render(eval_questions(demo, "chain_sum")[40].prompt_text)
    params = replace(demo.sampling.params(), n=600)
    (ours,) = backend.sample([prompt], params)
    theirs = backend.tokenizer.batch_decode(_plain_generate(backend, prompt, params),
                                            skip_special_tokens=True)
    a = [str(extract_last_boxed(s.text)) for s in ours]
    b = [str(extract_last_boxed(t)) for t in theirs]
    assert len({k for k in {*a, *b} if a.count(k) + b.count(k) >= 10}) >= 2  # a real spread
    assert _homogeneous(a, b) > 1e-3, _table(a, b, sorted({*a, *b}))


def test_a_merged_adapter_gives_pefts_merged_logits_and_restores_the_model(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, PeftModel, get_peft_model

    from saturated_dag.generation.models import load_model

    model, _ = load_model(str(tiny_model_dir), "float32", "cpu")
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj",
                                                                               "v_proj"]))
    torch.manual_seed(0)
    for name, param in peft.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)
    peft.save_pretrained(tmp_path / "adapter")
    base, _ = load_model(str(tiny_model_dir), "float32", "cpu")
    before = {k: v.clone() for k, v in base.state_dict().items()}
    ids = torch.tensor([[5, 9, 13, 2, 7]])
    with torch.no_grad():
        plain = base(input_ids=ids).logits
        with merged_adapter(base, tmp_path / "adapter"):
            ours = base(input_ids=ids).logits
        fresh, _ = load_model(str(tiny_model_dir), "float32", "cpu")
        merged = PeftModel.from_pretrained(fresh, tmp_path / "adapter").merge_and_unload()
        reference = merged(input_ids=ids).logits
    assert torch.allclose(ours, reference, atol=1e-5)
    assert not torch.allclose(ours, plain, atol=1e-3)  # the adapter changes the logits
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())


def test_validation_merge_restores_the_training_weights_bit_for_bit(
        tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    from saturated_dag.generation.models import load_model

    model, _ = load_model(str(tiny_model_dir), "float32", "cpu")
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    for name, param in peft.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)
    before = {k: v.clone() for k, v in peft.state_dict().items()}
    ids = torch.tensor([[5, 9, 13, 2, 7]])
    with torch.no_grad():
        unmerged = peft(input_ids=ids).logits
        with merged_peft_lora(peft):
            merged = peft(input_ids=ids).logits
        after = peft(input_ids=ids).logits
    assert torch.allclose(merged, unmerged, atol=1e-5)
    assert torch.equal(after, unmerged)
    assert all(torch.equal(before[k], v) for k, v in peft.state_dict().items())


@pytest.mark.parametrize("batch_size", [1, 3, 6])
def test_the_schedule_does_not_change_the_samples(tiny_model_dir: Path,
                                                  batch_size: int) -> None:
    """Other slot counts (fewer than n: a prompt's samples split over admissions) reuse
    slots in another order beside other rows; each row's tokens stay the same."""
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=batch_size)
    params = SamplingParams(n=4, temperature=0.8, top_p=0.9, max_new_tokens=5, seed=3)
    small = backend.sample(PROMPTS[:2], params)
    wide = TransformersBackend(backend.model, backend.tokenizer, batch_size=64).sample(
        PROMPTS[:2], params)
    assert _tokens(small) == _tokens(wide)
