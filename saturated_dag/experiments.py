"""The experiment matrix: which adapters a profile trains (split x method x scorer), plus the
paper's sweeps (λ ablation, σ-RRHF variants, DPO β x learning rate).

Pure data, so the Dagster layer builds one dataset, adapter and eval-report asset per cell,
and tests can check the matrix without Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from saturated_dag.config import TrainingSettings

DATASET_OF_METHOD = {"dpo": "dpo_pairs", "rrhf": "rrhf_groups", "sft": "sft_set",
                     "raft": "raft_set"}
RRHF_VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "no_sft": {"rrhf_use_sft": False},
    "no_hinge": {"rrhf_hinge": False},
    "no_logistic": {"rrhf_logistic_weight": False},
}
SWEEP_TITLES = {
    "rank_weight": "σ-RRHF rank-loss weight λ (Figure 6)",
    "rrhf_variants": "σ-RRHF variants (Table 8)",
    "dpo_beta": "DPO β and learning-rate sweep (Table 9)",
}


SUFFIX = {"rrhf_rank_weight": "lambda", "dpo_beta": "beta", "learning_rate": "lr"}
SWITCHES = {"rrhf_use_sft": "sft", "rrhf_hinge": "hinge", "rrhf_logistic_weight": "logistic"}


def _number(value: float) -> str:
    """The number as it appears in names and labels: short (``0.01``, ``5e-06``) and exact.

    ``:g`` keeps six significant digits, so ``1.2345678e-05`` and ``1.2345671e-05`` would name
    one adapter; where ``:g`` does not read back as ``value``, the exact ``repr`` is used, so
    distinct settings always give distinct names and ``float(text) == value``.
    """
    text = f"{value:g}"
    return text if float(text) == value else repr(float(value))


@dataclass(frozen=True)
class Experiment:
    """One adapter: trained with ``method`` on ``split``, from the dataset ``dataset``.

    ``overrides`` replace fields of the profile's ``training`` section for this adapter only
    (a sweep's λ, β, learning rate or σ-RRHF switch) and name it; a sweep value equal to the
    profile's own setting is the main matrix's adapter, trained once.
    """

    split: str
    method: str
    scorer: str | None  # None: no quality ranking (SFT; random correctness pairs)
    dataset: tuple[str, ...]  # asset key path below the task
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        if self.split == "hard" and self.method == "dpo":
            base = f"dpo_correctness_{self.scorer}"
        else:
            base = self.method if self.scorer is None else f"{self.method}_{self.scorer}"
        parts = [base]
        for key, value in self.overrides:
            if key in SWITCHES:
                parts.append(f"{'with' if value else 'no'}_{SWITCHES[key]}")
            else:
                parts.append(f"{SUFFIX[key]}{_number(value)}")
        return "_".join(parts)

    def training(self, base: TrainingSettings) -> TrainingSettings:
        """The profile's training settings with this cell's overrides applied."""
        return base.model_copy(update=dict(self.overrides)) if self.overrides else base


@dataclass(frozen=True)
class SweepRow:
    """One row of a sweep's table: its label, its settings and the adapter that runs it."""

    label: str
    settings: dict[str, Any] = field(hash=False)
    experiment: Experiment


def _dataset(split: str, method: str, scorer: str) -> tuple[str, ...]:
    if split == "hard" and method == "dpo":
        return (split, "correctness_pairs", scorer)
    return (split, DATASET_OF_METHOD[method], scorer)


def main_matrix(training: TrainingSettings) -> list[Experiment]:
    """Tables 1, 2 and 7: every (split, method, scorer) the profile asks for."""
    cells: list[Experiment] = []
    for split in training.splits:
        for method in training.methods:
            if method == "sft":
                cells.append(Experiment(split, "sft", None, (split, "sft_set")))
            elif split == "hard":  # App. C.1
                if method == "dpo":  # correct vs incorrect pairs
                    for pick in ("random", "self_judge"):
                        cells.append(Experiment(split, "dpo", pick, _dataset(split, "dpo", pick)))
                elif method == "rrhf":  # ranked by the self-judge, correct above incorrect
                    cells.append(Experiment(split, "rrhf", "self_judge",
                                            _dataset(split, "rrhf", "self_judge")))
            else:
                for scorer in training.scorers:
                    cells.append(Experiment(split, method, scorer,
                                            _dataset(split, method, scorer)))
    return cells


def _cell(training: TrainingSettings, split: str, method: str, scorer: str,
          settings: dict[str, Any]) -> Experiment:
    current = training.model_dump()
    overrides = tuple((k, v) for k, v in settings.items() if current[k] != v)
    return Experiment(split, method, scorer, _dataset(split, method, scorer), overrides)


def sweeps(training: TrainingSettings) -> dict[str, list[SweepRow]]:
    """The configured sweeps (App. C.2-C.4): their rows in order, each with its adapter."""
    configured = training.sweeps
    out: dict[str, list[SweepRow]] = {}
    if configured.rank_weight is not None:
        s = configured.rank_weight
        out["rank_weight"] = [
            SweepRow(f"λ={_number(v)}", {"lambda": v},
                     _cell(training, s.split, "rrhf", s.scorer, {"rrhf_rank_weight": v}))
            for v in s.values]
    if configured.rrhf_variants is not None:
        s = configured.rrhf_variants
        full = {"rrhf_use_sft": True, "rrhf_hinge": True, "rrhf_logistic_weight": True}
        out["rrhf_variants"] = [
            SweepRow(variant, {"variant": variant},
                     _cell(training, s.split, "rrhf", s.scorer,
                           {**full, **RRHF_VARIANTS[variant]}))
            for variant in s.variants]
    if configured.dpo_beta is not None:
        s = configured.dpo_beta
        out["dpo_beta"] = [
            SweepRow(f"β={_number(b)}, η={_number(lr)}", {"beta": b, "lr": lr},
                     _cell(training, s.split, "dpo", s.scorer,
                           {"dpo_beta": b, "learning_rate": lr}))
            for b in s.betas for lr in s.learning_rates]
    return out


def experiment_matrix(training: TrainingSettings) -> list[Experiment]:
    """Every adapter the profile trains (main matrix, then sweeps), each once, stable order."""
    cells = main_matrix(training)
    for rows in sweeps(training).values():
        cells += [row.experiment for row in rows]
    return list(dict.fromkeys(cells))
