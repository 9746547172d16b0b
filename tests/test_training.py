"""LoRA training on a tiny model: adapters change, base weights do not, σ-RRHF ranks."""

from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from saturated_dag.generation.models import load_model
from saturated_dag.losses import sequence_logprobs
from saturated_dag.training.config import DpoSettings, LoraSettings, RrhfSettings, SftSettings
from saturated_dag.training.rrhf_trainer import GroupCollator
from saturated_dag.training.train import train_adapter

LORA = LoraSettings(r=4, alpha=8, dropout=0.0)
FAST = {"epochs": 2, "batch_size": 2, "per_device_batch_size": 2, "learning_rate": 5e-2,
        "max_length": 96, "lora": LORA}
PROMPT = "<|user|>Compute the following step by step:\n1 + 2 =<|end|><|assistant|>"
GOOD, BAD = "1 + 2 = 3 \\boxed{3}", "The answer probably is 3 \\boxed{3}"


def _rrhf_data() -> pd.DataFrame:
    rows = []
    for q in range(2):
        for i, (text, score) in enumerate([(GOOD, 1.0), (BAD, 0.0), (GOOD + " ok", 0.5)]):
            rows.append({"question_id": f"q{q}", "sample_index": i, "prompt": PROMPT,
                         "completion": text, "score": score})
    return pd.DataFrame(rows)


def _norm_logp(model_dir: str, adapter: str | None, completion: str) -> float:
    model, tok = load_model(model_dir)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    batch = GroupCollator(tok, 96, add_special_tokens=False)(
        [{"prompt": PROMPT, "completions": [completion], "scores": [0.0]}])
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"]).logits
    sums, counts = sequence_logprobs(logits[:, :-1], batch["input_ids"][:, 1:],
                                     batch["completion_mask"][:, 1:])
    return (sums / counts).item()


def _lora_tensors(adapter: Path) -> dict[str, torch.Tensor]:
    return load_file(str(adapter / "adapter_model.safetensors"))


def test_rrhf_raises_best_completion_and_keeps_base(tiny_model_dir: Path, tmp_path: Path) -> None:
    base_before = {k: v.clone() for k, v in load_model(str(tiny_model_dir))[0].state_dict().items()}
    before = _norm_logp(str(tiny_model_dir), None, GOOD)
    seen: list[float] = []
    result = train_adapter(
        "rrhf", str(tiny_model_dir), _rrhf_data(),
        RrhfSettings(**FAST), tmp_path / "rrhf",
        eval_fn=lambda model, tok: seen.append(1.0) or 0.5 * len(seen))
    adapter = Path(result.adapter_dir)
    assert (adapter / "adapter_config.json").is_file()
    assert result.best_epoch == 2 and [e["val_pass@1"] for e in result.epochs] == [0.5, 1.0]
    lora_b = [v for k, v in _lora_tensors(adapter).items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)  # B starts at zero
    assert _norm_logp(str(tiny_model_dir), str(adapter), GOOD) > before
    base_after = load_model(str(tiny_model_dir))[0].state_dict()
    assert all(torch.equal(base_before[k], base_after[k]) for k in base_before)
    assert any("rank_loss" in h for h in result.log_history)


def test_dpo_and_sft_train_adapters(tiny_model_dir: Path, tmp_path: Path) -> None:
    dpo = pd.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 4)
    result = train_adapter("dpo", str(tiny_model_dir), dpo, DpoSettings(beta=0.5, **FAST),
                           tmp_path / "dpo")
    assert result.best_epoch == 2 and any("rewards/margins" in h for h in result.log_history)
    assert _norm_logp(str(tiny_model_dir), result.adapter_dir, GOOD) > _norm_logp(
        str(tiny_model_dir), result.adapter_dir, BAD)
    sft = pd.DataFrame([{"prompt": PROMPT, "completion": GOOD}] * 4)
    result = train_adapter("sft", str(tiny_model_dir), sft, SftSettings(**FAST), tmp_path / "sft")
    assert _norm_logp(str(tiny_model_dir), result.adapter_dir, GOOD) > _norm_logp(
        str(tiny_model_dir), None, GOOD)


def test_nan_loss_stops_and_keeps_previous_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "rrhf"
    train_adapter("rrhf", str(tiny_model_dir), _rrhf_data(), RrhfSettings(**{**FAST, "epochs": 1}),
                  out)
    before = _lora_tensors(out)
    model, tok = load_model(str(tiny_model_dir))
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")  # every logit becomes NaN
    broken = tmp_path / "broken_model"
    model.save_pretrained(broken)
    tok.save_pretrained(broken)
    with pytest.raises(FloatingPointError, match="σ-RRHF loss is nan"):
        train_adapter("rrhf", str(broken), _rrhf_data(), RrhfSettings(**FAST), out)
    after = _lora_tensors(out)
    assert all(torch.equal(before[k], after[k]) for k in before)
    names = sorted(p.name for p in tmp_path.iterdir())
    live = [n for n in names if n.startswith(".rrhf@")]  # the folder the `rrhf` link names
    assert len(live) == 1 and (tmp_path / "rrhf").resolve().name == live[0]
    assert [n for n in names if n not in live] == ["broken_model", "rrhf"]  # no debris
    # TRL's trainers are guarded too: the logged loss is checked at every logging step
    dpo = pd.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 2)
    with pytest.raises(FloatingPointError, match="training loss is nan"):
        train_adapter("dpo", str(broken), dpo, DpoSettings(**FAST), tmp_path / "dpo")
    assert not (tmp_path / "dpo").exists()


def test_empty_training_set_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="training set is empty"):
        train_adapter("sft", str(tiny_model_dir), pd.DataFrame(), SftSettings(**FAST),
                      tmp_path / "x")
    with pytest.raises(ValueError, match="unknown training method 'ppo'"):
        train_adapter("ppo", str(tiny_model_dir), pd.DataFrame(), SftSettings(), tmp_path / "x")


def test_swap_in_replaces_an_adapter_in_one_rename(tmp_path: Path) -> None:
    from saturated_dag.training.train import swap_in

    out = tmp_path / "adapters" / "sft"
    out.mkdir(parents=True)
    (out / "weights").write_text("old")  # a plain folder from an older version
    for text in ("new", "newer"):
        folder = tmp_path / "adapters" / f"build-{text}"
        folder.mkdir()
        (folder / "weights").write_text(text)
        scratch = tmp_path / f"scratch-{text}"
        scratch.mkdir()
        swap_in(folder, out, scratch)
        assert out.is_symlink() and (out / "weights").read_text() == text
    hidden = sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".sft@"))
    assert len(hidden) == 1  # the replaced version was removed, the live one kept
