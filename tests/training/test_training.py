"""LoRA training on a tiny model: adapters change, base weights do not, σ-RRHF ranks."""

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from saturated_dag.config import TrainingSettings
from saturated_dag.generation.models import load_model
from saturated_dag.training.config import grad_accumulation, resolve_dtype
from saturated_dag.training.losses import RrhfLossConfig, rrhf_loss, sequence_logprobs
from saturated_dag.training.rrhf_trainer import GroupCollator, rrhf_questions_per_device
from saturated_dag.training.train import train_adapter

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first

FAST = {"epochs": 2, "batch_size": 2, "per_device_batch_size": 2, "learning_rate": 5e-2,
        "max_length": 96, "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0}
PROMPT = "<|user|>Compute the following step by step:\n1 + 2 =<|end|><|assistant|>"
GOOD, BAD = "1 + 2 = 3 \\boxed{3}", "The answer probably is 3 \\boxed{3}"
KEY_A, KEY_B = "0123456789abcdef" + "0" * 48, "fedcba9876543210" + "0" * 48
"""Two cache keys: their first 16 hex digits name their adapters' key folders."""


def _rrhf_data() -> pl.DataFrame:
    rows = []
    for q in range(2):
        for i, (text, score) in enumerate([(GOOD, 1.0), (BAD, 0.0), (GOOD + " ok", 0.5)]):
            rows.append({"question_id": f"q{q}", "sample_index": i, "prompt": PROMPT,
                         "completion": text, "score": score})
    return pl.DataFrame(rows)


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
        TrainingSettings(**FAST), tmp_path / "rrhf",
        eval_fn=lambda model, tok, folder: seen.append(1.0) or 0.5 * len(seen))
    adapter = Path(result.adapter_dir)
    assert (adapter / "adapter_config.json").is_file()
    assert result.best_epoch == 2 and [e["val_pass@1"] for e in result.epochs] == [0.5, 1.0]
    lora_b = [v for k, v in _lora_tensors(adapter).items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)  # B starts at zero
    assert _norm_logp(str(tiny_model_dir), str(adapter), GOOD) > before
    base_after = load_model(str(tiny_model_dir))[0].state_dict()
    assert all(torch.equal(base_before[k], base_after[k]) for k in base_before)
    assert any("rank_loss" in h for h in result.log_history)


def test_the_kept_epochs_validation_files_are_published_with_its_adapter(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """The validator writes each epoch's results into that epoch's snapshot (the folder it is
    given); the kept epoch, here the first (the better validation), is the published adapter,
    so its files, not the last epoch's, are in the adapter's folder."""
    scores = iter([0.75, 0.25])

    def validate(model: object, tokenizer: object, folder: Path) -> float:
        (folder / "validated.txt").write_text(folder.name)
        return next(scores)

    result = train_adapter("rrhf", str(tiny_model_dir), _rrhf_data(), TrainingSettings(**FAST),
                           tmp_path / "rrhf", eval_fn=validate)
    assert result.best_epoch == 1
    assert (Path(result.adapter_dir) / "validated.txt").read_text() == "epoch_1"


def test_dpo_and_sft_train_adapters(tiny_model_dir: Path, tmp_path: Path) -> None:
    dpo = pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 4)
    result = train_adapter("dpo", str(tiny_model_dir), dpo, TrainingSettings(dpo_beta=0.5, **FAST),
                           tmp_path / "dpo")
    assert result.best_epoch == 2 and any("rewards/margins" in h for h in result.log_history)
    assert _norm_logp(str(tiny_model_dir), result.adapter_dir, GOOD) > _norm_logp(
        str(tiny_model_dir), result.adapter_dir, BAD)
    sft = pl.DataFrame([{"prompt": PROMPT, "completion": GOOD}] * 4)
    result = train_adapter("sft", str(tiny_model_dir), sft, TrainingSettings(**FAST),
                           tmp_path / "sft")
    assert _norm_logp(str(tiny_model_dir), result.adapter_dir, GOOD) > _norm_logp(
        str(tiny_model_dir), None, GOOD)


def test_dpo_with_an_nll_anchor_combines_trls_losses_and_lifts_the_chosen_completion(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """``training.dpo_nll_weight`` > 0 (not the paper's DPO): TRL's ``["sigmoid", "sft"]``
    losses with ``loss_weights=[1, w]``; the NLL term on the chosen completion raises its
    likelihood above what plain DPO leaves it at, from the same seed. 0 is the paper's DPO."""
    from transformers import TrainerCallback

    seen: list[tuple[list[str], list[float] | None]] = []

    class Args(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            seen.append((list(args.loss_type), args.loss_weights))

    dpo = pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 4)
    plain = train_adapter("dpo", str(tiny_model_dir), dpo, TrainingSettings(dpo_beta=0.5, **FAST),
                          tmp_path / "plain", callbacks=[Args()])
    anchored = train_adapter("dpo", str(tiny_model_dir), dpo,
                             TrainingSettings(dpo_beta=0.5, dpo_nll_weight=1.0, **FAST),
                             tmp_path / "anchored", callbacks=[Args()])
    assert seen == [(["sigmoid"], None), (["sigmoid", "sft"], [1.0, 1.0])]
    assert _norm_logp(str(tiny_model_dir), anchored.adapter_dir, GOOD) > _norm_logp(
        str(tiny_model_dir), plain.adapter_dir, GOOD)


def test_each_dpo_loss_type_reaches_trls_trainer_and_the_default_is_the_papers(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """``training.dpo_loss_type`` is TRL's ``DPOConfig.loss_type`` as set (every value the
    profile accepts is one TRL lists, and each trains), with the NLL anchor after it when
    ``dpo_nll_weight`` > 0; the default, in ``TrainingSettings`` and in every shipped profile,
    is the paper's ``sigmoid``."""
    import inspect
    import typing

    from transformers import TrainerCallback
    from trl import DPOConfig

    from saturated_dag.config import DpoLossType
    from saturated_dag.profiles import available_profiles, load_profile

    allowed = typing.get_args(DpoLossType)
    documented = inspect.getsource(DPOConfig)
    assert all(f"`'{loss}'`" in documented for loss in allowed)  # TRL's own list
    assert TrainingSettings().dpo_loss_type == "sigmoid"
    for name in available_profiles():
        profile = load_profile(name)
        listed = profile.training.selection.dpo_loss_types
        assert profile.training.dpo_loss_type == "sigmoid", name
        assert listed is None or listed[0] == "sigmoid", name  # the paper's first
    seen: list[tuple[list[str], list[float] | None]] = []

    class Args(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            seen.append((list(args.loss_type), args.loss_weights))

    dpo = pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 2)
    fast = {**FAST, "epochs": 1}
    for loss in allowed:
        result = train_adapter("dpo", str(tiny_model_dir), dpo,
                               TrainingSettings(dpo_beta=0.5, dpo_loss_type=loss, **fast),
                               tmp_path / loss, callbacks=[Args()])
        assert any("rewards/chosen" in h for h in result.log_history), loss
    train_adapter("dpo", str(tiny_model_dir), dpo,
                  TrainingSettings(dpo_beta=0.5, dpo_loss_type="ipo", dpo_nll_weight=0.5,
                                   **fast), tmp_path / "ipo_nll", callbacks=[Args()])
    assert seen == [*(([loss], None) for loss in allowed), (["ipo", "sft"], [1.0, 0.5])]
    with pytest.raises(ValueError, match="dpo_loss_type"):
        TrainingSettings(dpo_loss_type="robust")  # reads label_smoothing: not offered


def test_nan_loss_stops_and_keeps_previous_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    from saturated_dag.training.folders import key_folder

    home = tmp_path / "rrhf"
    out = key_folder(home, KEY_A)
    train_adapter("rrhf", str(tiny_model_dir), _rrhf_data(),
                  TrainingSettings(**{**FAST, "epochs": 1}), out)
    before = _lora_tensors(out)
    model, tok = load_model(str(tiny_model_dir))
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")  # every logit becomes NaN
    broken = tmp_path / "broken_model"
    model.save_pretrained(broken)
    tok.save_pretrained(broken)
    for key in (KEY_B, KEY_A):  # a new key's training, and a retraining of the same key
        with pytest.raises(FloatingPointError, match="σ-RRHF loss is nan"):
            train_adapter("rrhf", str(broken), _rrhf_data(), TrainingSettings(**FAST),
                          key_folder(home, key))
        after = _lora_tensors(out)
        assert all(torch.equal(before[k], after[k]) for k in before)
        assert [p.name for p in home.iterdir()] == [KEY_A[:16]]  # no debris, no new folder
    # TRL's trainers are guarded too: the logged loss is checked at every logging step
    dpo = pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 2)
    with pytest.raises(FloatingPointError, match="training loss is nan"):
        train_adapter("dpo", str(broken), dpo, TrainingSettings(**FAST), tmp_path / "dpo")
    assert not (tmp_path / "dpo").exists()


def test_empty_training_set_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="training set is empty"):
        train_adapter("sft", str(tiny_model_dir), pl.DataFrame(), TrainingSettings(**FAST),
                      tmp_path / "x")
    with pytest.raises(ValueError, match="unknown training method 'ppo'"):
        train_adapter("ppo", str(tiny_model_dir), pl.DataFrame(), TrainingSettings(),
                      tmp_path / "x")
    import pandas as pd

    pandas_frame: Any = pd.DataFrame({"prompt": [PROMPT], "completion": [GOOD]})
    with pytest.raises(TypeError, match="sft: the training set must be a polars DataFrame"):
        train_adapter("sft", str(tiny_model_dir), pandas_frame, TrainingSettings(**FAST),
                      tmp_path / "x")
    with pytest.raises(TypeError, match="must be a TrainingSettings"):  # not its dump
        train_adapter("sft", str(tiny_model_dir), pl.DataFrame(), FAST,  # type: ignore[arg-type]
                      tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_rrhf_groups_keep_the_order_the_trainer_was_given() -> None:
    """Questions by sorted id (as text: q10 before q2), completions in row order, rows
    without an id dropped: pandas' ``groupby(sort=True)``, which the seeded data order and so
    the adapter depends on."""
    from saturated_dag.training.train import _rrhf_groups

    data = pl.DataFrame({"question_id": ["q2", "q10", "q2", None, "q10", "q2"],
                         "prompt": ["p2", "p10", "p2", "px", "p10", "p2"],
                         "completion": ["b", "y", "a", "zz", "x", "c"],
                         "score": [0.5, 1.0, 0.0, 0.3, 2.0, 1.0]})
    assert _rrhf_groups(data) == [
        {"prompt": "p10", "completions": ["y", "x"], "scores": [1.0, 2.0]},
        {"prompt": "p2", "completions": ["b", "a", "c"], "scores": [0.5, 0.0, 1.0]},
    ]
    with pytest.raises(ValueError, match=r"rrhf: 1 completion\(s\) have no score"):
        _rrhf_groups(data.with_columns(score=pl.Series([0.5, None, 0.0, 0.3, 2.0, 1.0])))


def test_trl_dataset_holds_the_frames_rows_in_order() -> None:
    from saturated_dag.training.train import _dataset

    data = pl.DataFrame({"question_id": ["b", "a", "c"], "prompt": ["p1", "p0", "p2"],
                         "chosen": ["x\n", "é", ""], "rejected": ["r", "s", "t"]})
    columns = ["prompt", "chosen", "rejected"]
    dataset = _dataset(data, columns)
    assert dataset.column_names == columns
    assert dataset.to_dict() == data.select(columns).to_dict(as_series=False)


def test_an_adapter_is_published_into_its_key_folder_by_one_rename(tmp_path: Path) -> None:
    """A key folder is written once: publishing moves the finished folder in; one left from
    before under the same key (found unusable) is moved into the scratch folder first, and
    recording a key current removes the home's other key folders, never a scratch folder."""
    from saturated_dag.training.folders import (
        current_folder,
        key_folder,
        publish,
        record_current,
    )

    home = tmp_path / "adapters" / "sft"
    home.mkdir(parents=True)
    assert current_folder(home) is None
    live_scratch = home / f".{KEY_B[:16]}-abcdefgh"
    live_scratch.mkdir()
    for key, text in ((KEY_A, "a"), (KEY_A, "a again"), (KEY_B, "b")):
        folder = tmp_path / f"build-{text}"
        folder.mkdir()
        (folder / "weights").write_text(text)
        scratch = tmp_path / f"scratch-{text}"
        scratch.mkdir()
        out = key_folder(home, key)
        publish(folder, out, scratch)
        assert not folder.exists() and (out / "weights").read_text() == text
        removed = record_current(home, out)
        assert current_folder(home) == out and out.name == key[:16]
    assert (scratch_a := tmp_path / "scratch-a again" / "unusable" / "weights").read_text() == "a"
    assert scratch_a.is_file() and [p.name for p in removed] == [KEY_A[:16]]
    assert sorted(p.name for p in home.iterdir()) == sorted(
        [live_scratch.name, KEY_B[:16], "current"])


def test_a_key_folder_needs_a_hex_key_and_a_bad_pointer_is_refused_by_name(
        tmp_path: Path) -> None:
    from saturated_dag.training.folders import current_folder, key_folder

    with pytest.raises(ValueError, match="hex digits"):
        key_folder(tmp_path, "not-a-key")
    (tmp_path / "current").write_text("../../etc\n")
    with pytest.raises(ValueError, match=r"current: '\.\./\.\./etc' is not a key folder"):
        current_folder(tmp_path)


def test_an_earlier_layouts_folders_are_retired(tmp_path: Path) -> None:
    """``<name>`` as a symlink to ``.<name>@<ns>``, its temporary links, and a plain folder of
    the layout before the symlinks go; another adapter's files of a shared prefix stay."""
    from saturated_dag.training.folders import retire_old_layout

    parent = tmp_path / "adapters" / "gsm8k" / "easy"
    parent.mkdir(parents=True)
    (parent / ".sft@200").mkdir()
    (parent / ".sft@100").mkdir()
    (parent / "sft").symlink_to(".sft@200")
    (parent / ".sft.link-4242").symlink_to(".sft@200")
    (parent / ".sft_entropy@100").mkdir()
    (parent / "sft_entropy").symlink_to(".sft_entropy@100")
    (parent / "sft_curves.png").write_bytes(b"png")
    removed = retire_old_layout(parent / "sft")
    assert {p.name for p in removed} == {"sft", ".sft@200", ".sft@100", ".sft.link-4242"}
    assert sorted(p.name for p in parent.iterdir()) == [".sft_entropy@100", "sft_curves.png",
                                                         "sft_entropy"]
    plain = parent / "dpo"
    plain.mkdir()
    (plain / "adapter_config.json").write_text("{}")
    assert retire_old_layout(plain) == [plain] and not plain.exists()
    keyed = parent / "rrhf"  # the keyed layout: nothing to retire
    (keyed / KEY_A[:16]).mkdir(parents=True)
    (keyed / KEY_A[:16] / "adapter_config.json").write_text("{}")
    assert retire_old_layout(keyed) == [] and (keyed / KEY_A[:16]).is_dir()
    assert retire_old_layout(tmp_path / "missing" / "sft") == []


def _varied_rrhf_data(questions: int) -> pl.DataFrame:
    """``questions`` different questions of 3 completions with distinct scores."""
    rows = []
    for q in range(questions):
        prompt = PROMPT.replace("1 + 2", f"{q} + 2")
        texts = [f"{q} + 2 = {q + 2} \\boxed{{{q + 2}}}", f"maybe {q + 3} \\boxed{{{q + 3}}}",
                 f"{q} + 2 is {q + 2}"]
        for i, (text, score) in enumerate(zip(texts, [1.0, 0.0, 0.4 + 0.1 * q], strict=True)):
            rows.append({"question_id": f"q{q}", "sample_index": i, "prompt": prompt,
                         "completion": text, "score": score})
    return pl.DataFrame(rows)


def _mean_question_loss(model_dir: Path, data: pl.DataFrame, config: RrhfLossConfig) -> float:
    """The paper's per-question σ-RRHF loss under the base model, averaged over questions
    (each question's loss computed alone, so no batching convention enters)."""
    model, tok = load_model(str(model_dir))
    collate = GroupCollator(tok, 96, add_special_tokens=False)
    losses = []
    for g in data.sort("question_id", maintain_order=True).partition_by("question_id"):
        batch = collate([{"prompt": g["prompt"][0], "completions": g["completion"].to_list(),
                          "scores": g["score"].to_list()}])
        with torch.no_grad():
            logits = model(input_ids=batch["input_ids"],
                           attention_mask=batch["attention_mask"]).logits
        sums, counts = sequence_logprobs(logits[:, :-1], batch["input_ids"][:, 1:],
                                         batch["completion_mask"][:, 1:])
        losses.append(rrhf_loss(sums, counts, batch["scores"], batch["group"], config)[0].item())
    return sum(losses) / len(losses)


class _Probe(TrainerCallback):
    """Records the trainer's batch arguments, micro-batches per step and checkpointing."""

    def __init__(self) -> None:
        self.args: dict[str, int] = {}
        self.checkpointing: list[bool] = []
        self.dtypes: set[torch.dtype] = set()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> None:
        self.args = {"per_device": args.per_device_train_batch_size,
                     "accumulation": args.gradient_accumulation_steps, "bf16": args.bf16}

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                    **kwargs: Any) -> None:
        self.checkpointing.append(any(getattr(m, "gradient_checkpointing", False)
                                      for m in model.modules()))
        self.dtypes |= {p.dtype for p in model.parameters() if not p.requires_grad}


def test_rrhf_questions_per_device_never_splits_a_question() -> None:
    assert rrhf_questions_per_device(8, 8) == 1  # the paper: one question of n = 8
    assert rrhf_questions_per_device(16, 8) == 2
    assert rrhf_questions_per_device(12, 5) == 2  # rounded down to whole questions
    assert rrhf_questions_per_device(2, 3) == 1  # a larger question still goes whole
    with pytest.raises(ValueError, match="must be positive"):
        rrhf_questions_per_device(0, 3)


@pytest.mark.parametrize(("questions", "per_device", "micro"), [
    (4, 3, [1, 1, 1, 1]),  # accumulation over 4 micro-batches of one question
    (3, 6, [2, 1]),  # uneven: the step's mean, not the mean of the micro-batch means
])
def test_rrhf_accumulation_gives_the_update_of_one_batch(
        tiny_model_dir: Path, tmp_path: Path, questions: int, per_device: int,
        micro: list[int]) -> None:
    # batch_size counts completions: 12 = one optimizer step over all questions here. Adam's
    # first step hardly depends on the gradient's scale, so the logged loss (the paper's
    # per-question loss averaged over the questions: LoRA B starts at zero, so the first
    # step's loss is the base model's) and the pre-clip gradient norm pin the scale (a loss
    # summed over questions, or not divided over the micro-batches, changes both); the LoRA
    # weights check the update itself.
    data = _varied_rrhf_data(questions)
    runs = {}
    for name, device_batch in (("accumulated", per_device), ("one_batch", 12)):
        probe = _Probe()
        # one optimizer step per epoch: no warmup (``warmup_guard``), a first step above lr 0
        settings = TrainingSettings(**{**FAST, "epochs": 1, "batch_size": 12,
                                       "per_device_batch_size": device_batch,
                                       "rrhf_rank_weight": 1.0})
        result = train_adapter("rrhf", str(tiny_model_dir), data, settings, tmp_path / name,
                               callbacks=[probe])
        step = next(h for h in result.log_history if "loss" in h)
        runs[name] = (probe.args, step, _lora_tensors(Path(result.adapter_dir)))
    (args_a, step_a, lora_a), (args_b, step_b, lora_b) = runs["accumulated"], runs["one_batch"]
    assert args_a["per_device"] == micro[0] and args_a["accumulation"] == 12 // per_device
    assert args_b["per_device"] == 4 and args_b["accumulation"] == 1  # questions per pass
    assert step_a["step"] == step_b["step"] == 1
    expected = _mean_question_loss(tiny_model_dir, data, RrhfLossConfig(rank_weight=1.0))
    assert step_b["loss"] == pytest.approx(expected, rel=1e-4)
    for key in ("loss", "grad_norm", "rank_loss", "sft_loss"):
        assert step_a[key] == pytest.approx(step_b[key], rel=1e-4), key
    assert lora_a.keys() == lora_b.keys()
    assert any(v.abs().sum() > 0 for k, v in lora_a.items() if "lora_B" in k)
    for key in lora_a:
        assert torch.allclose(lora_a[key], lora_b[key], atol=1e-6), key


def _train_probed(method: str, model_dir: Path, out: Path, **overrides: Any
                  ) -> tuple[Any, _Probe]:
    data = {"rrhf": _rrhf_data(),
            "dpo": pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 4),
            "sft": pl.DataFrame([{"prompt": PROMPT, "completion": GOOD}] * 4)}[method]
    probe = _Probe()
    result = train_adapter(method, str(model_dir), data,
                           TrainingSettings(**{**FAST, "epochs": 1, **overrides}), out,
                           callbacks=[probe])
    return result, probe


@pytest.mark.parametrize("method", ["rrhf", "dpo", "sft"])
def test_gradient_checkpointing_trains_to_the_same_loss(
        tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    plain, plain_probe = _train_probed(method, tiny_model_dir, tmp_path / "plain")
    ckpt, ckpt_probe = _train_probed(method, tiny_model_dir, tmp_path / "ckpt",
                                     gradient_checkpointing=True)
    assert ckpt_probe.checkpointing and all(ckpt_probe.checkpointing)
    assert not any(plain_probe.checkpointing)
    losses = [[h["loss"] for h in r.log_history if "loss" in h] for r in (plain, ckpt)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    before, after = _lora_tensors(Path(plain.adapter_dir)), _lora_tensors(Path(ckpt.adapter_dir))
    assert any(v.abs().sum() > 0 for k, v in after.items() if "lora_B" in k)  # LoRA learned
    for key in before:
        assert torch.allclose(before[key], after[key], atol=1e-5), key
    record = json.loads((Path(ckpt.adapter_dir) / "training_config.json").read_text())
    assert record["settings"]["gradient_checkpointing"] is True


@pytest.mark.parametrize("method", ["rrhf", "dpo", "sft"])
def test_bfloat16_training_loads_bf16_and_sets_the_mixed_precision_flag(
        tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    # An explicit bfloat16 runs on a CPU too (emulated): the GPU's code path, checked here.
    result, probe = _train_probed(method, tiny_model_dir, tmp_path / method, dtype="bfloat16",
                                  gradient_checkpointing=True)
    assert probe.args["bf16"] is True and probe.dtypes == {torch.bfloat16}
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in result.log_history if "loss" in h)
    lora = _lora_tensors(Path(result.adapter_dir))
    assert any(v.abs().sum() > 0 for k, v in lora.items() if "lora_B" in k)
    record = json.loads((Path(result.adapter_dir) / "training_config.json").read_text())
    assert record["precision"] == "bfloat16" and record["settings"]["dtype"] == "bfloat16"


def test_auto_dtype_is_float32_on_a_cpu(tiny_model_dir: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result, probe = _train_probed("sft", tiny_model_dir, tmp_path / "sft")
    assert probe.args["bf16"] is False and probe.dtypes == {torch.float32}
    record = json.loads((Path(result.adapter_dir) / "training_config.json").read_text())
    assert record["precision"] == "float32" and record["settings"]["dtype"] == "auto"


def test_resolve_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_dtype("auto") == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"
    assert resolve_dtype("float32") == "float32"
    with pytest.raises(ValueError, match="must be one of"):
        resolve_dtype("fp16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_dtype("auto") == "bfloat16"
    assert resolve_dtype("float32") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "Tesla V100")
    assert resolve_dtype("auto") == "float32"
    with pytest.raises(ValueError, match=r"does not support bf16.*Tesla V100"):
        resolve_dtype("bfloat16")


@pytest.mark.parametrize("method", ["dpo", "rrhf", "sft", "raft"])
def test_the_trainer_config_carries_precision_and_checkpointing(method: str) -> None:
    from saturated_dag.training.rrhf_trainer import RrhfConfig
    from saturated_dag.training.train import trainer_config

    training = TrainingSettings(dtype="bfloat16", gradient_checkpointing=True, batch_size=16,
                                per_device_batch_size=8)
    config = trainer_config(method, training, "/nonexistent", resolve_dtype(training.dtype))
    assert config.bf16 is True and config.gradient_checkpointing is True
    assert config.gradient_accumulation_steps == grad_accumulation(training) == 2
    assert isinstance(config, RrhfConfig) == (method == "rrhf")


@pytest.mark.parametrize("method", ["rrhf", "sft"])
def test_same_settings_give_the_same_adapter_whatever_ran_before(
        tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    # LoRA's A matrices are drawn when the adapter is created: without a seed there, the
    # adapter depended on the process's random state (found by the accumulation test).
    adapters = []
    for state in (1, 2):
        torch.manual_seed(state)
        result, _ = _train_probed(method, tiny_model_dir, tmp_path / f"run{state}")
        adapters.append(_lora_tensors(Path(result.adapter_dir)))
    assert all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])


@pytest.mark.parametrize("method", ["dpo", "sft"])
def test_trl_accumulation_gives_the_update_of_one_batch(
        tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    # TRL's trainers own their scaling (DPO: mean over pairs, divided by the micro-batches;
    # SFT: mean over the step's completion tokens): 2 x 2 examples must equal 1 x 4.
    texts = [GOOD, BAD, GOOD + " ok", "3 \\boxed{3}"]
    data = {"dpo": pl.DataFrame([{"prompt": PROMPT, "chosen": t, "rejected": BAD + t[:3]}
                                 for t in texts]),
            "sft": pl.DataFrame([{"prompt": PROMPT, "completion": t} for t in texts])}[method]
    steps = []
    for per_device in (2, 4):
        # one optimizer step per epoch: no warmup (``warmup_guard``), a first step above lr 0
        settings = TrainingSettings(**{**FAST, "epochs": 1, "batch_size": 4,
                                       "per_device_batch_size": per_device})
        result = train_adapter(method, str(tiny_model_dir), data, settings,
                               tmp_path / f"{method}{per_device}")
        steps.append(next(h for h in result.log_history if "loss" in h))
    assert steps[0]["step"] == steps[1]["step"] == 1
    for key in ("loss", "grad_norm"):
        assert steps[0][key] == pytest.approx(steps[1][key], rel=1e-4), key


# --- issue 15 item 5: what a killed run leaves beside the adapter is removed on its next start


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _scratch(parent: Path, name: str, pid: int | None = None) -> Path:
    import socket

    folder = parent / name
    folder.mkdir()
    (folder / "trainer").mkdir()  # as a killed run leaves it: checkpoints inside
    if pid is not None:
        (folder / "owner.json").write_text(json.dumps({"host": socket.gethostname(),
                                                        "pid": pid}))
    return folder


def test_remove_leftovers_takes_dead_scratch_of_any_key_and_spares_a_live_run(
        tmp_path: Path) -> None:
    """An adapter's home holds only its own folders, so every dead ``.<key>-XXXXXXXX`` in it
    is a killed training's; a live process's (here: the test's parent) stays, and so do the
    key folders, the pointer and anything not named like a scratch folder."""
    import os

    from saturated_dag.training.folders import remove_leftovers

    home = tmp_path / "adapters" / "sft"
    home.mkdir(parents=True)
    a, b = KEY_A[:16], KEY_B[:16]
    (home / a).mkdir()
    (home / "current").write_text(a + "\n")
    dead = [_scratch(home, f".{a}-abc12345"), _scratch(home, f".{b}-x_9y8z7w", pid=_dead_pid())]
    live = _scratch(home, f".{b}-live1234", pid=os.getppid())
    _scratch(home, ".notakey-abc12345")
    removed = remove_leftovers(home)
    assert sorted(removed) == sorted(dead)
    assert sorted(p.name for p in home.iterdir()) == sorted(
        [".notakey-abc12345", a, "current", live.name])
    assert remove_leftovers(tmp_path / "missing" / "sft") == []


def test_mkdtemp_names_fit_the_leftover_pattern() -> None:
    """The pattern relies on mkdtemp's random part: 8 characters without "-", "." or "@"."""
    import re
    import tempfile

    from saturated_dag.infra.atomic import scratch_pattern

    scratch = scratch_pattern("sft_lambda0.01")
    names = [Path(tempfile.mkdtemp(prefix=".sft_lambda0.01-", dir=tempfile.gettempdir()))
             for _ in range(20)]
    try:
        assert all(scratch.fullmatch(n.name) for n in names)
        assert not scratch.fullmatch(".sft_lambda0x01-abcdefgh")  # the dot is literal
        assert not re.search(r"[-.@]", "".join(n.name[-8:] for n in names))
    finally:
        for n in names:
            n.rmdir()


def test_training_start_removes_a_killed_runs_leftovers_and_keeps_the_umask(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """A killed training's ``<home>/.<key>-XXXXXXXX`` goes on the next training of the adapter
    (under any key); another adapter's home is not touched. The adapter's folder and files
    get the umask's modes (002: group-writable), not mkdtemp's 0700."""
    import os
    import stat

    from saturated_dag.training.folders import key_folder

    home = tmp_path / "adapters" / "sft"
    home.mkdir(parents=True)
    out = key_folder(home, KEY_A)
    killed = _scratch(home, f".{KEY_B[:16]}-k1ll3d00")
    other = _scratch(tmp_path / "adapters", ".sft_entropy-k1ll3d00")
    said: list[str] = []
    previous = os.umask(0o002)
    try:
        result = train_adapter("sft", str(tiny_model_dir),
                               pl.DataFrame([{"prompt": PROMPT, "completion": GOOD}] * 2),
                               TrainingSettings(**{**FAST, "epochs": 1}), out,
                               log=said.append)
    finally:
        os.umask(previous)
    assert not killed.exists() and other.is_dir()
    assert any(killed.name in line for line in said)
    assert [p.name for p in home.iterdir()] == [KEY_A[:16]]  # this run left nothing else
    assert Path(result.adapter_dir) == out and not out.is_symlink()
    assert stat.S_IMODE(out.stat().st_mode) == 0o775
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == (0o775 if path.is_dir() else 0o664), path


_TRAIN_IN_A_PROCESS = """
import random, sys
from pathlib import Path
import torch
from tests.training.test_training import _train_probed
method, model_dir, state, out = sys.argv[1:]
torch.manual_seed(int(state))  # a different random state before training, in each process
random.seed(int(state))
_train_probed(method, Path(model_dir), Path(out))
"""


@pytest.mark.parametrize("method", ["rrhf", "dpo", "sft"])
def test_an_adapter_is_a_function_of_its_seed_across_processes(
        tiny_model_dir: Path, tmp_path: Path, method: str) -> None:
    """Two processes, other random states and hash seeds: bit-identical LoRA weights."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    adapters = []
    for state in (1, 2):
        out = tmp_path / f"process{state}"
        run = subprocess.run(
            [sys.executable, "-c", _TRAIN_IN_A_PROCESS, method, str(tiny_model_dir), str(state),
             str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONHASHSEED": str(state)})
        assert run.returncode == 0, run.stderr[-3000:]
        adapters.append(_lora_tensors(out))
    assert adapters[0].keys() == adapters[1].keys()
    assert all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])


def test_warmup_never_lasts_the_whole_first_epoch() -> None:
    from types import SimpleNamespace

    from saturated_dag.training.train import warmup_guard

    for per_epoch, epochs, expected in ((1, 1, 0), (1, 4, 0), (2, 1, 1), (2, 4, 1),
                                        (10, 1, 1), (11, 1, 2), (10, 4, 4)):
        trainer = SimpleNamespace(args=SimpleNamespace(warmup_steps=0.1))
        assert warmup_guard(trainer, 0.1, per_epoch, epochs) == expected, (per_epoch, epochs)
        # transformers' own rounding (ceil) is kept unless the first epoch would be all warmup
        assert trainer.args.warmup_steps == (0 if expected == 0 else 0.1)


def test_a_one_step_dpo_run_moves_the_adapter_and_reads_the_pairs_direction(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """One optimizer step (2 pairs, batch 2, 1 epoch): it used to run at learning rate 0 (a
    linear warmup of 1 step starts at 0), so every lora_B stayed 0 and the adapter was the
    base model, whatever the pairs said. Now it trains, and swapping chosen and rejected (a
    broken DPO loss would do the same) moves the margin the other way."""
    one_step = {**FAST, "epochs": 1}
    pairs = pl.DataFrame([{"prompt": PROMPT, "chosen": GOOD, "rejected": BAD}] * 2)
    swapped = pairs.rename({"chosen": "rejected", "rejected": "chosen"})
    margins = {}
    for name, data in (("right", pairs), ("swapped", swapped)):
        result = train_adapter("dpo", str(tiny_model_dir), data,
                               TrainingSettings(dpo_beta=0.5, **one_step), tmp_path / name)
        lrs = [h["learning_rate"] for h in result.log_history if "learning_rate" in h]
        assert lrs and max(lrs) > 0
        b = [v for k, v in _lora_tensors(Path(result.adapter_dir)).items() if "lora_B" in k]
        assert b and any(bool(t.count_nonzero()) for t in b)
        margins[name] = (_norm_logp(str(tiny_model_dir), result.adapter_dir, GOOD)
                         - _norm_logp(str(tiny_model_dir), result.adapter_dir, BAD))
    base = _norm_logp(str(tiny_model_dir), None, GOOD) - _norm_logp(str(tiny_model_dir), None,
                                                                     BAD)
    assert margins["right"] > base > margins["swapped"]


def test_an_adapter_equal_to_the_base_is_refused_naming_why(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    from saturated_dag.training.train import UntrainedAdapter, check_trained

    save_file({"x.lora_A.weight": torch.ones(2, 2), "x.lora_B.weight": torch.zeros(2, 2)},
              str(tmp_path / "adapter_model.safetensors"))
    with pytest.raises(UntrainedAdapter, match=r"all ran at learning rate 0 \(1 warmup"):
        check_trained(tmp_path, 1, [0.0], 1)
    with pytest.raises(UntrainedAdapter, match=r"every gradient was 0"):
        check_trained(tmp_path, 2, [0.0, 1e-3], 1)
    save_file({"x.lora_A.weight": torch.ones(2, 2), "x.lora_B.weight": torch.eye(2)},
              str(tmp_path / "adapter_model.safetensors"))
    check_trained(tmp_path, 1, [0.0], 1)  # moved: fine



@pytest.mark.parametrize("method", ["sft", "dpo", "rrhf"])
def test_report_to_defaults_to_none_and_is_passed_to_every_trainer(
        method: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    """``report_to`` is one argument of ``train_adapter`` (default: no tracker) that reaches
    each method's ``TrainingArguments``; a profile setting can be wired into it."""
    import inspect

    from saturated_dag.training.train import REPORT_TO_DEFAULT, _build_trainer

    assert REPORT_TO_DEFAULT == "none"
    assert inspect.signature(train_adapter).parameters["report_to"].default == "none"
    settings = TrainingSettings(**FAST)
    data = {"sft": pl.DataFrame({"prompt": [PROMPT] * 2, "completion": [GOOD, BAD]}),
            "dpo": pl.DataFrame({"prompt": [PROMPT] * 2, "chosen": [GOOD] * 2,
                                 "rejected": [BAD] * 2}),
            "rrhf": _rrhf_data()}[method]
    model, tokenizer = load_model(str(tiny_model_dir))
    trainer = _build_trainer(method, model, tokenizer, data, settings, str(tmp_path / "a"),
                             "float32")
    assert trainer.args.report_to == []  # transformers' "none"
    model, tokenizer = load_model(str(tiny_model_dir))
    tracked = _build_trainer(method, model, tokenizer, data, settings, str(tmp_path / "b"),
                             "float32", report_to=["mlflow"])
    assert tracked.args.report_to == ["mlflow"]


def test_train_adapter_hands_report_to_to_the_trainer(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from saturated_dag.training import train

    seen: list[Any] = []

    def spy(*args: Any, report_to: Any = "unset", **kwargs: Any) -> Any:
        seen.append(args[-1] if report_to == "unset" else report_to)
        raise RuntimeError("stop: the trainer is not needed")

    monkeypatch.setattr(train, "_build_trainer", spy)
    data = pl.DataFrame({"prompt": [PROMPT] * 2, "completion": [GOOD, BAD]})
    for given in ({}, {"report_to": ["mlflow"]}):
        with pytest.raises(RuntimeError, match="stop"):
            train_adapter("sft", str(tiny_model_dir), data, TrainingSettings(**FAST),
                          tmp_path / "sft", **given)
    assert seen == ["none", ["mlflow"]]


def test_a_progress_line_says_how_long_the_run_still_needs() -> None:
    """Training steps and a step's adapters take about equal time: the time left is the mean
    pace so far times what remains, in seconds under a minute and a half, else minutes."""
    from saturated_dag.infra.log import time_left

    assert time_left(10.0, 10, 30) == "~20 s left"
    assert time_left(60.0, 1, 4) == "~3 min left"
    assert time_left(5.0, 0, 4) == "estimating"
    assert time_left(5.0, 4, 4) == "done"


def test_sampling_and_judging_progress_lines_say_the_time_left() -> None:
    """Issue 47: every step that runs longer than a minute states its time left; the demo's
    self-judge step (1 min 29 s on 2 cores) logged only 'judged 16/1736 comparisons'."""
    import re
    import time

    from saturated_dag.data.pool import progress_logger
    from saturated_dag.scorers.judges import _progress

    lines: list[str] = []
    progress = progress_logger(lines.append, progress_every=50)
    progress(5, 10)
    progress(10, 10)
    assert re.fullmatch(r"generated 5/10 completions \(50%, ~\d+ s left\)", lines[0]), lines
    assert lines[1] == "generated 10/10 completions (100%, done)"
    every_tenth: list[str] = []  # the default: a line every 10 per cent
    default = progress_logger(every_tenth.append)
    for done in range(1, 21):
        default(done, 20)
    assert len(every_tenth) == 10 and every_tenth[-1].endswith("(100%, done)"), every_tenth
    report = _progress(lines.append, 4, 8, time.monotonic() - 2.0)
    assert report is not None
    report(2, 4)  # 6 of 8 in about 2 s
    assert re.fullmatch(r"judged 6/8 comparisons \(~\d s left\)", lines[-1]), lines
