"""The sampler on a GPU: the checks of ``tests/generation/test_decoder.py`` on CUDA, then its
throughput against batched ``generate`` on the embedded model and on a model with Qwen3-1.7B's
layers.

Why a separate script: the default suite runs on CPU only, and the continuous-batching
sampler (``generation/decoder.py``) is also the paper profiles' transformers path on GPU
(validation pass@1 inside training; vLLM does the eval sampling there). What can differ on
CUDA: the device of every tensor the decoder makes, the determinism of its kernels, and
whether slot bookkeeping in Python costs more than it saves when a decoding step is fast.

    python -m benchmarks.gpu_sampler --out /tmp/gpu_sampler.json          # needs CUDA
    python -m benchmarks.gpu_sampler --device cpu --toy                    # a dry run

The Qwen3-1.7B-shaped model has random weights and a small vocabulary (the tiny test
tokenizer's), so its rows run to the token limit: a timing of the layers' work, not of text.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_sampling import batched_generate, ours_sampling
from benchmarks.common import alternate, chain_sum_prompts, machine, median
from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from tests.tiny_models import build_tiny_model, build_tokenizer


def _check(name: str, ok: bool, detail: str, out: list[dict[str, Any]]) -> None:
    out.append({"check": name, "ok": bool(ok), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def correctness(device: str, folder: Path, checks: list[dict[str, Any]]) -> None:
    """``tests/generation/test_decoder.py``'s checks with the model on ``device``."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from scipy.stats import chi2_contingency

    from saturated_dag.generation.models import load_model
    from saturated_dag.generation.multi_lora import merged_adapter

    model_dir = build_tiny_model(folder / "tiny")
    backend = TransformersBackend.load(str(model_dir), batch_size=7, device=device)
    prompts = ["alpha beta", "the answer is", "one two three four five six", "x", "hello"]
    params = SamplingParams(n=3, temperature=0.8, top_p=0.9, max_new_tokens=10, seed=3)
    first, second = backend.sample(prompts, params), backend.sample(prompts, params)
    _check("two runs give the same samples", first == second,
           f"{sum(len(r) for r in first)} samples, tokens and entropies compared", checks)
    wide = TransformersBackend(backend.model, backend.tokenizer, batch_size=6)
    tokens = [[s.token_ids for s in row] for row in first]
    other = [[s.token_ids for s in row] for row in wide.sample(prompts, params)]
    _check("another slot count gives the same tokens", tokens == other,
           "7 slots against 6", checks)

    wide.batch_size = 512
    hom = SamplingParams(n=3000, temperature=0.7, top_p=0.8, max_new_tokens=3, seed=2)
    (ours,) = wide.sample([prompts[1]], hom)
    ids = torch.tensor([backend.encode_prompt(prompts[1])], device=device)
    torch.manual_seed(2)
    with torch.no_grad():
        out = backend.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
            temperature=0.7, top_p=0.8, top_k=None, max_new_tokens=3, num_return_sequences=3000,
            eos_token_id=backend.eos_ids, pad_token_id=backend.tokenizer.pad_token_id)
    a = [s.token_ids[0] for s in ours]
    b = out[:, ids.shape[1]].tolist()
    keys = [k for k in sorted({*a, *b}) if a.count(k) + b.count(k) >= 10]
    rest = [sum(x not in keys for x in a), sum(x not in keys for x in b)]
    table = [[seq.count(k) for k in keys] + ([r] if any(rest) else [])
             for seq, r in ((a, rest[0]), (b, rest[1]))]
    p = float(chi2_contingency(table).pvalue)
    _check("first tokens follow plain generate", p > 1e-3 and len(keys) > 3,
           f"chi-square homogeneity p = {p:.3g} over {len(keys)} tokens, 3,000 samples each",
           checks)

    model, _ = load_model(str(model_dir), "float32", device)
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj",
                                                                               "v_proj"]))
    torch.manual_seed(0)
    for name, param in peft.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)
    peft.save_pretrained(folder / "adapter")
    base, _ = load_model(str(model_dir), "float32", device)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    x = torch.tensor([[5, 9, 13, 2, 7]], device=device)
    with torch.no_grad():
        with merged_adapter(base, folder / "adapter"):
            merged = base(input_ids=x).logits
        fresh, _ = load_model(str(model_dir), "float32", device)
        reference = PeftModel.from_pretrained(fresh, folder / "adapter").merge_and_unload()
        expected = reference(input_ids=x).logits
    gap = float((merged - expected).abs().max())
    _check("a merged adapter gives PEFT's merged logits", gap < 1e-4,
           f"largest difference {gap:.2e}", checks)
    restored = all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    _check("the weights are restored bit for bit", restored, "every tensor compared", checks)


def qwen3_shaped(folder: Path, dtype: torch.dtype) -> Path:
    """Random weights with Qwen3-1.7B's layer shapes and the tiny test tokenizer."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(chat_template=False)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=2048, intermediate_size=6144,
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=4096, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, torch_dtype=dtype)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def throughput(spec: str, device: str, dtype: str, questions: int, n: int,
               max_new_tokens: int, slots: int, repeats: int) -> dict[str, Any]:
    """Tokens per second of ours and of batched ``generate`` (the same rows), alternating."""
    backend = TransformersBackend.load(spec, dtype=dtype, batch_size=slots, device=device)
    prompts, _ = chain_sum_prompts(backend, questions)
    params = SamplingParams(n=n, temperature=0.6, top_p=0.95, max_new_tokens=max_new_tokens,
                            seed=0)

    def sync(fn: Any) -> Any:
        def run() -> Any:
            result = fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return result
        return run

    seconds, results = alternate({
        "batched": sync(lambda: batched_generate(backend, prompts, params, slots)),
        "ours": sync(lambda: ours_sampling(backend, prompts, params)),
    }, repeats, warmup=True)
    rate = {k: sum(len(t) for t in results[k]) / median(seconds[k]) for k in results}
    row = {"model": spec, "dtype": dtype, "questions": questions, "n": n,
           "max_new_tokens": max_new_tokens, "slots": slots, "seconds": seconds,
           "tokens": {k: sum(len(t) for t in v) for k, v in results.items()},
           "tokens_per_s": rate, "ours_over_batched": rate["ours"] / rate["batched"]}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--toy", action="store_true", help="tiny sizes: a dry run of the script")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    from saturated_dag.infra.parallel import cuda_devices

    report: dict[str, Any] = {"machine": machine(), "torch": torch.__version__,
                              "cuda_devices": cuda_devices()}
    if args.device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)
    start = time.perf_counter()
    checks: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        correctness(args.device, Path(tmp), checks)
        report["checks"] = checks
        q, n, tokens, repeats = (4, 2, 8, 1) if args.toy else (64, 8, 256, 3)
        report["throughput"] = [throughput("arith-base", args.device, "float32", q, n, tokens,
                                           256, repeats)]
        shaped = str(qwen3_shaped(Path(tmp) / "qwen3_shaped", torch.bfloat16)) \
            if not args.toy else str(build_tiny_model(Path(tmp) / "toy", chat_template=False))
        report["throughput"].append(throughput(
            shaped, args.device, "bfloat16" if not args.toy else "float32", q, n,
            tokens, 256, min(repeats, 2)))
        report["throughput"][-1]["model"] = "Qwen3-1.7B-shaped, random weights" \
            if not args.toy else "tiny"
    report["seconds"] = time.perf_counter() - start
    report["all_checks_pass"] = all(c["ok"] for c in checks)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=float))
    print(json.dumps({k: report[k] for k in ("all_checks_pass", "seconds")}), flush=True)
    return report


if __name__ == "__main__":
    main()
