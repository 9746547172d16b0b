"""Several LoRA adapters in one batch (``multi_lora``, ``TransformersBackend.sample_many``),
compared with PEFT's own forward, and samples that do not depend on their batch."""

from pathlib import Path

import pytest
import torch

from saturated_dag.generation.base import SampleRequest, SamplingParams
from saturated_dag.generation.models import load_model
from saturated_dag.generation.multi_lora import attached_adapters, read_adapter
from saturated_dag.generation.transformers_backend import TransformersBackend

PROMPTS = ["1 + 2 =", "3 + 4 + 5 =", "12 + 7 =", "9 ="]


def _adapter(model_dir: Path, out: Path, seed: int, **lora: object) -> Path:
    """A LoRA adapter with random (non-zero) A and B, as after training."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model, _ = load_model(str(model_dir))
    config = LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                        target_modules=["q_proj", "v_proj", "o_proj"], **lora)
    peft = get_peft_model(model, config)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_" in name:
                param.mul_(3.0)  # large enough to change the samples visibly
    peft.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapters(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("adapters")
    return [_adapter(tiny_model_dir, root / "a", 1),
            _adapter(tiny_model_dir, root / "b", 2, use_rslora=True)]


def _ids(model_dir: Path) -> tuple[torch.Tensor, torch.Tensor]:
    _, tokenizer = load_model(str(model_dir))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    enc = tokenizer(PROMPTS[:3], return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]


@torch.no_grad()
def test_rows_get_their_adapters_logits_as_peft_merged_and_mixed_batch(
        tiny_model_dir: Path, adapters: list[Path]) -> None:
    from peft import PeftModel

    ids, mask = _ids(tiny_model_dir)
    model, _ = load_model(str(tiny_model_dir))
    base_logits = model(input_ids=ids, attention_mask=mask).logits
    with attached_adapters(model, adapters) as rows:
        rows.set_rows(torch.tensor([0, 1, 2]))
        ours = model(input_ids=ids, attention_mask=mask).logits
    merged = []
    for folder in adapters:
        fresh, _ = load_model(str(tiny_model_dir))
        merged.append(PeftModel.from_pretrained(fresh, folder).merge_and_unload()(
            input_ids=ids, attention_mask=mask).logits)
    torch.testing.assert_close(ours[0], base_logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours[1], merged[0][1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours[2], merged[1][2], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(merged[0][1], base_logits[1], atol=1e-3)  # the test can fail

    # PEFT's mixed-adapter batch: one forward, a list of adapter names per row
    fresh, _ = load_model(str(tiny_model_dir))
    peft = PeftModel.from_pretrained(fresh, adapters[0], adapter_name="a")
    peft.load_adapter(adapters[1], adapter_name="b")
    peft.eval()
    mixed = peft(input_ids=ids, attention_mask=mask, adapter_names=["__base__", "a", "b"]).logits
    torch.testing.assert_close(ours, mixed, atol=1e-5, rtol=1e-5)


def test_the_model_is_restored_after_the_block_even_on_an_error(
        tiny_model_dir: Path, adapters: list[Path]) -> None:
    model, _ = load_model(str(tiny_model_dir))
    before = {name: type(m) for name, m in model.named_modules()}
    with pytest.raises(RuntimeError, match="boom"), attached_adapters(model, adapters):
        assert type(model.get_submodule("model.layers.0.self_attn.q_proj")).__name__ \
            == "MultiLoraLinear"
        raise RuntimeError("boom")
    assert {name: type(m) for name, m in model.named_modules()} == before


def test_unsupported_adapters_are_refused_by_name(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = _adapter(tiny_model_dir, tmp_path / "dora", 3, use_dora=True)
    with pytest.raises(ValueError, match="use_dora"):
        read_adapter(folder)
    with pytest.raises(FileNotFoundError, match=r"adapter_config\.json"):
        read_adapter(tmp_path)


def _samples(result: list[list[list]]) -> list:
    return [[[(s.token_ids, s.finish_reason) for s in row] for row in request]
            for request in result]


def test_batched_adapters_sample_exactly_what_each_samples_alone(
        tiny_model_dir: Path, adapters: list[Path]) -> None:
    """The equivalence the eval reports rely on: base + two adapters decoded in one batch
    give the token ids each gives alone, and the batch size changes nothing."""
    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=64)
    params = SamplingParams(n=4, temperature=0.8, top_p=0.95, max_new_tokens=12, seed=5)
    requests = [SampleRequest(PROMPTS, params, adapter) for adapter in (None, *adapters)]
    together = backend.sample_many(requests)
    alone = [backend.sample_many([r])[0] for r in requests]
    assert _samples(together) == _samples([[*a] for a in alone])
    assert _samples(backend.sample_many(requests, batch_size=5)) == _samples(together)
    # the adapters do change the samples (else this test could not fail)
    assert _samples([together[0]]) != _samples([together[1]])
    assert _samples([together[1]]) != _samples([together[2]])
    # a prompt's samples do not depend on the other prompts of its request either
    one = backend.sample_many([SampleRequest(PROMPTS[1:2], params, adapters[0])])[0]
    assert [s.token_ids for s in one[0]] != []
    alone_base = backend.sample(PROMPTS, params)
    assert _samples([alone_base]) == _samples([together[0]])
    # the entropy is the same up to the last bits of a differently shaped batch
    assert [s.mean_entropy for row in alone_base for s in row] == pytest.approx(
        [s.mean_entropy for row in together[0] for s in row], rel=1e-5)


def test_each_row_draws_from_the_requested_distribution(tiny_model_dir: Path) -> None:
    """Inverse-CDF draws from each row's own stream follow the warped next-token
    distribution: 4,000 one-token samples of one prompt against softmax(logits / T) under
    top-p, by a chi-square test (p > 1e-3; the statistic is printed on failure)."""
    from scipy.stats import chisquare
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    backend = TransformersBackend.load(str(tiny_model_dir), batch_size=512)
    params = SamplingParams(n=4000, temperature=0.9, top_p=0.9, max_new_tokens=1, seed=11)
    (row,) = backend.sample([PROMPTS[0]], params)
    ids = torch.tensor([backend.encode_prompt(PROMPTS[0])])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[:, -1, :].float()
    warped = TopPLogitsWarper(0.9)(ids, TemperatureLogitsWarper(0.9)(ids, logits))
    probs = torch.softmax(warped, dim=-1)[0]
    support = torch.nonzero(probs > 0).squeeze(1).tolist()
    counts = torch.bincount(torch.tensor([s.token_ids[0] for s in row]),
                            minlength=probs.numel())
    assert counts[probs == 0].sum() == 0  # never a token outside top-p
    observed = counts[support].double()
    expected = probs[support].double() * len(row)
    result = chisquare(observed.numpy(), expected.numpy() * observed.sum().item()
                       / expected.sum().item())
    assert len(support) > 1 and result.pvalue > 1e-3, result
