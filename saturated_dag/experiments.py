"""The experiment matrix: which adapters a profile trains (split x method x scorer).

Pure data, so the Dagster layer builds one dataset, adapter and eval-report asset per cell,
and tests can check the matrix without Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass

from saturated_dag.config import TrainingSettings

DATASET_OF_METHOD = {"dpo": "dpo_pairs", "rrhf": "rrhf_groups", "sft": "sft_set",
                     "raft": "raft_set"}


@dataclass(frozen=True)
class Experiment:
    """One adapter: trained with ``method`` on ``split``, from the dataset ``dataset``."""

    split: str
    method: str
    scorer: str | None  # None: no quality ranking (SFT; random correctness pairs)
    dataset: tuple[str, ...]  # asset key path below the task

    @property
    def name(self) -> str:
        if self.split == "hard" and self.method == "dpo":
            return f"dpo_correctness_{self.scorer}"
        return self.method if self.scorer is None else f"{self.method}_{self.scorer}"


def experiment_matrix(training: TrainingSettings) -> list[Experiment]:
    """Every (split, method, scorer) the profile asks for, in a stable order."""
    cells: list[Experiment] = []
    for split in training.splits:
        for method in training.methods:
            if method == "sft":
                cells.append(Experiment(split, "sft", None, (split, "sft_set")))
            elif split == "hard":
                if method == "dpo":  # App. C.1: correct vs incorrect pairs
                    for pick in ("random", "self_judge"):
                        cells.append(Experiment(split, "dpo", pick,
                                                (split, "correctness_pairs", pick)))
            else:
                for scorer in training.scorers:
                    cells.append(Experiment(split, method, scorer,
                                            (split, DATASET_OF_METHOD[method], scorer)))
    return cells
