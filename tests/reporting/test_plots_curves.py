"""Training curves (``plots.adapter_curves``, ``plots.cell_overlay``): the loss of every logged
step, validation pass@1 per epoch, the kept epoch and a cell's chosen configuration marked.

The inputs are shaped like a ``result.json`` of a training (``epochs``, ``log_history``:
Hugging Face's log, the trainer's closing summary as its last entry); the figures are read
back from their SVG, whose text is kept as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from saturated_dag.reporting.plots import (
    _logged_steps,
    adapter_curves,
    cell_overlay,
    training_curves,
)


def _result(steps: int = 12, epochs: int = 3, dpo: bool = False, rrhf: bool = False,
            shift: float = 0.0) -> dict:
    """A result.json's training record: ``steps`` logged steps over ``epochs`` epochs."""
    per_epoch = steps // epochs
    log = []
    for step in range(1, steps + 1):
        entry = {"loss": 1.0 / step + shift, "learning_rate": 3e-4, "epoch": step / per_epoch,
                 "step": step}
        if dpo:
            entry["rewards/margins"] = 0.1 * step
        if rrhf:
            entry |= {"rank_loss": 0.5 / step, "sft_loss": 0.5 / step + shift}
        log.append(entry)
    log.append({"train_runtime": 2.0, "train_loss": 0.4, "epoch": float(epochs), "step": steps})
    return {"epochs": [{"epoch": e, "step": e * per_epoch, "val_pass@1": 0.3 + 0.05 * e - shift}
                       for e in range(1, epochs + 1)],
            "log_history": log, "best_epoch": epochs}


def _svg(path: Path) -> str:
    return path.with_suffix(".svg").read_text()


def test_the_summary_entry_is_not_a_step() -> None:
    """The trainer's closing summary (``train_loss``) has no ``loss``: 12 steps, not 13."""
    steps, loss = _logged_steps(_result()["log_history"], "loss")
    assert steps == [float(s) for s in range(1, 13)] and len(loss) == 12


@pytest.mark.parametrize(("kind", "panels"), [("sft", 2), ("dpo", 3), ("rrhf", 2)])
def test_adapter_curves_draw_every_step_and_mark_the_kept_epoch(
        tmp_path: Path, kind: str, panels: int) -> None:
    result = _result(dpo=kind == "dpo", rrhf=kind == "rrhf")
    png, svg = adapter_curves(result["epochs"], result["log_history"], tmp_path / "c.png",
                              f"chain_sum · {kind}", kept_epoch=2)
    assert png.exists() and svg.exists()
    text = _svg(png)
    assert "loss per logged step" in text and "validation pass@1 per epoch" in text
    assert "kept epoch (2)" in text and "end of an epoch" in text  # every marker named
    assert ("DPO reward margin" in text) == (panels == 3)
    assert ("rank part" in text and "SFT part" in text) == (kind == "rrhf")


def test_adapter_curves_without_a_kept_epoch(tmp_path: Path) -> None:
    """Before selection there is no kept epoch: the curve is drawn, nothing is starred."""
    result = _result()
    png, _ = adapter_curves(result["epochs"], result["log_history"], tmp_path / "c.png", "t")
    assert "kept epoch" not in _svg(png)


def test_cell_overlay_marks_every_seed_of_the_chosen_configuration(tmp_path: Path) -> None:
    runs = {f"lr{lr}_seed{seed}": _result(shift=0.01 * i)
            for i, (lr, seed) in enumerate((lr, s) for lr in ("0.0001", "0.0003") for s in (0, 1))}
    chosen = {"lr0.0003_seed0", "lr0.0003_seed1"}
    png, svg = cell_overlay(runs, chosen, tmp_path / "overlay.png", "chain_sum · saturated · sft")
    text = svg.read_text()
    assert png.exists()
    for label in runs:  # four runs: each named in the legend
        assert (f"{label} (chosen)" in text) == (label in chosen)
        assert label in text
    assert "kept epoch (chosen)" in text


def test_cell_overlay_of_many_runs_names_only_the_chosen(tmp_path: Path) -> None:
    """A 16-run cell: a legend row per run would cover the curves, so the others are counted."""
    runs = {f"beta{b}_lr{lr}_seed0": _result(dpo=True, shift=0.001 * b * lr)
            for b in range(1, 5) for lr in range(1, 5)}
    png, _ = cell_overlay(runs, {"beta2_lr3_seed0"}, tmp_path / "o.png", "t")
    text = _svg(png)
    assert "beta2_lr3_seed0 (chosen)" in text and "15 other runs" in text
    assert "beta1_lr1_seed0" not in text


def test_cell_overlay_needs_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no runs"):
        cell_overlay({}, set(), tmp_path / "o.png", "t")


def test_training_curves_keeps_its_signature(tmp_path: Path) -> None:
    """``training_curves(epochs, margins, path, title)`` still returns the PNG's path."""
    result = _result()
    path = training_curves(result["epochs"], [0.1, 0.2], tmp_path / "old.png", "t")
    assert path == tmp_path / "old.png" and path.exists()
