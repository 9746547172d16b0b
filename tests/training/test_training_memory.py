"""The training-memory estimate: its arithmetic by hand, its counts against real models."""

from dataclasses import replace

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3Config, Qwen3ForCausalLM

from saturated_dag.profiles import load_profile
from saturated_dag.training.memory import (
    GIB,
    OVERHEAD,
    QWEN3_1_7B,
    ModelShape,
    StepShape,
    cases,
    estimate,
    layer_bytes_per_token,
    lora_weight_copies,
    main,
    profile_steps,
    shape_from_config,
)

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def _tiny_qwen3(layers: int) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=1000, hidden_size=256, intermediate_size=768,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=64, tie_word_embeddings=True, attn_implementation="sdpa")
    return Qwen3ForCausalLM(config)


def test_parameter_counts_match_real_models() -> None:
    model = _tiny_qwen3(2)
    shape = shape_from_config(model.config)
    assert shape.parameters() == sum(p.numel() for p in model.parameters())
    peft = get_peft_model(model, LoraConfig(r=8, target_modules=list(TARGETS)))
    trainable = sum(p.numel() for p in peft.parameters() if p.requires_grad)
    assert shape.lora_parameters(8, TARGETS) == trainable
    # Qwen3-1.7B-Base: 1.7B parameters, 1.4B of them outside the (tied) embeddings
    assert QWEN3_1_7B.parameters() == pytest.approx(1.7205e9, rel=1e-3)
    assert QWEN3_1_7B.parameters() - 151_936 * 2048 == pytest.approx(1.4094e9, rel=1e-3)
    with pytest.raises(ValueError, match="not projections"):
        shape.lora_parameters(8, ("lm_head",))


def _saved_bytes(layers: int, bf16: bool, dropout: float, padded: bool) -> int:
    """Bytes autograd saves in a forward pass of 2 x 128 tokens (parameters excluded)."""
    model = _tiny_qwen3(layers).to(torch.bfloat16 if bf16 else torch.float32)
    model = get_peft_model(model, LoraConfig(r=8, lora_dropout=dropout,
                                             target_modules=list(TARGETS)))
    model.train()
    ids = torch.randint(0, 1000, (2, 128))
    mask = torch.ones(2, 128, dtype=torch.long)
    mask[1, -10:] = 0
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with (torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16),
          torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t)):
        model(input_ids=ids, attention_mask=mask if padded else None)
    return sum(size for ptr, size in seen.items() if ptr not in params)


@pytest.mark.parametrize(("bf16", "dropout", "padded"), [
    (False, 0.05, True), (True, 0.05, True), (True, 0.05, False), (False, 0.0, False),
    (True, 0.0, True)])
def test_layer_count_equals_what_autograd_saves(bf16: bool, dropout: float,
                                                padded: bool) -> None:
    # One more decoder layer adds exactly the estimated bytes. On a CPU, dropout keeps a
    # float32 mask (CUDA's keeps a bool one: the estimate's default of 1 byte).
    measured = _saved_bytes(3, bf16, dropout, padded) - _saved_bytes(2, bf16, dropout, padded)
    shape = shape_from_config(_tiny_qwen3(1).config)
    step = StepShape(sequences=2, length=128, compute_bytes=2 if bf16 else 4,
                     checkpointing=False, lora_r=8, lora_targets=TARGETS,
                     lora_dropout=dropout > 0, padded=padded, dropout_mask_bytes=4)
    assert layer_bytes_per_token(shape, step) * 256 + lora_weight_copies(shape, step) == measured


SMALL = ModelShape(layers=2, hidden=4, intermediate=8, heads=2, kv_heads=1, head_dim=2,
                   vocab=10, tied=True, qk_norm=False)
STEP = StepShape(sequences=1, length=3, compute_bytes=4, checkpointing=False, lora_r=1,
                 lora_targets=("q_proj",), lora_dropout=True, padded=False)


def test_small_case_by_hand() -> None:
    # norms 2 x (4·4 + 4) = 40; LoRA on q: 4·1 + 4·4 + 1·4 = 24;
    # attention: 4 x (2·4 + 2·2) + 4·2 = 56; SwiGLU: 3·4·8 = 96
    assert layer_bytes_per_token(SMALL, STEP) == 216
    e = estimate("rrhf", SMALL, STEP)
    assert e.held["base weights"] == 4 * SMALL.parameters()
    assert SMALL.parameters() == 2 * (4 * 4 + 2 * 4 * 2 + 4 * 4 + 3 * 4 * 8 + 8) + 10 * 4 + 4
    assert e.held["LoRA weights, gradients, AdamW moments (fp32)"] == 16 * 2 * (4 + 4)
    assert e.held["saved activations"] == 2 * 216 * 3 + 3 * (4 * 4 + 4)
    assert e.moments["loss backward"]["logits"] == 3 * 10 * 4
    assert e.peak == sum(e.held.values()) + max(sum(m.values()) for m in e.moments.values())
    assert e.held["allowance (CUDA context, workspaces, slack)"] == OVERHEAD
    ckpt = estimate("rrhf", SMALL, replace(STEP, checkpointing=True))
    assert ckpt.held["saved activations"] == 2 * 3 * 4 * 4 + 3 * (4 * 4 + 4)
    assert ckpt.moments["layer backward"] == {"recomputed layer": 216 * 3,
                                              "its gradients": 216 * 3}
    dpo = estimate("dpo", SMALL, STEP)
    assert "logits" not in dpo.moments["loss backward"]  # TRL's fused LM head
    assert dpo.moments["reference pass"]["one no_grad layer"] == 216 * 3
    with pytest.raises(ValueError, match="unknown training method"):
        estimate("ppo", SMALL, STEP)


def test_paper_profile_fits_an_80_gb_card_and_the_old_settings_did_not() -> None:
    profile = load_profile("paper")
    steps = profile_steps(profile)
    assert {m: s.sequences for m, s in steps.items()} == {"dpo": 16, "rrhf": 8, "sft": 8}
    assert all(s.compute_bytes == 2 and s.checkpointing and s.length == 2048
               for s in steps.values())
    for setting, method, step in cases(profile):
        peak = estimate(method, QWEN3_1_7B, step).peak
        if setting == "profile":
            assert peak < 80e9, (method, peak / GIB)
        if setting == "old paper settings":
            assert peak > 80e9, (method, peak / GIB)
    old = {m: s for setting, m, s in cases(profile) if setting == "old paper settings"}
    logits = estimate("rrhf", QWEN3_1_7B, old["rrhf"]).moments["loss backward"]["logits"]
    assert logits == 64 * 4096 * 151_936 * 4  # 8 questions x n = 8, float32


def test_module_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    main(["paper"])
    out = capsys.readouterr().out
    assert out.startswith("| setting | method |") and "old paper settings" in out
    with pytest.raises(SystemExit, match="usage"):
        main([])
