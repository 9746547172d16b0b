"""Entropy scores (Sec. 3.2): r = 1 / max(H-bar, epsilon), H-bar the mean token entropy at T=1.

Why two routes: the transformers backend measures H-bar while sampling (``EntropyTracker``),
vLLM cannot (no full distributions), so missing values are recomputed teacher-forced under the
policy model, chunk by chunk (``teacher_forced_mean_entropy``); the two agree on the same tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from saturated_dag.scorers.selection import Selection, score_frame
from saturated_dag.shards import ShardStore, run_shards

EntropyFn = Callable[[str, str, str], float]
"""``(rendered prompt, completion text, finish_reason) -> H-bar``."""


class TeacherForcedEntropy:
    """H-bar of a stored completion under a transformers model, re-tokenised.

    The completion text was decoded without special tokens, so the EOS that ended a ``stop``
    completion is appended again: the generation pass counts the EOS step too. With
    ``include_eos=False`` it is not (``scoring.entropy_include_eos``), except for a completion
    with no text token, whose only generated token is the EOS.
    """

    def __init__(self, model: Any, tokenizer: Any, encode_prompt: Callable[[str], list[int]],
                 eos_id: int, chunk: int = 256, include_eos: bool = True):
        self.model, self.tokenizer, self.encode_prompt = model, tokenizer, encode_prompt
        self.eos_id, self.chunk, self.include_eos = eos_id, chunk, include_eos
        self.calls = 0

    @classmethod
    def from_backend(cls, backend: Any, chunk: int = 256,
                     include_eos: bool = True) -> TeacherForcedEntropy:
        """From a ``TransformersBackend`` (its model, tokenizer, prompt encoding and EOS)."""
        return cls(backend.model, backend.tokenizer, backend.encode_prompt,
                   backend.eos_ids[0], chunk, include_eos)

    def completion_ids(self, completion: str, finish_reason: str) -> list[int]:
        ids = list(self.tokenizer(completion, add_special_tokens=False)["input_ids"])
        if finish_reason == "stop" and (self.include_eos or not ids):
            return [*ids, self.eos_id]
        return ids

    def __call__(self, prompt: str, completion: str, finish_reason: str) -> float:
        from saturated_dag.generation.entropy import teacher_forced_mean_entropy

        self.calls += 1
        ids = self.completion_ids(completion, finish_reason)
        return teacher_forced_mean_entropy(self.model, self.encode_prompt(prompt), ids,
                                           chunk=self.chunk)


def entropy_scores(
    selection: Selection,
    epsilon: float = 1e-8,
    teacher_forced: EntropyFn | None = None,
    store: ShardStore | None = None,
    shard_size: int | None = None,
    include_eos: bool = True,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Scores plus route counts. ``teacher_forced`` is needed only when H-bar is missing (and
    called only for shards not already in ``store``: ``shard_size`` questions per shard).

    ``include_eos=False``: the generation pass's H-bar includes the EOS step, so every
    completion is recomputed teacher-forced (``teacher_forced`` must then leave the EOS out).
    """
    rows = selection.rows
    if not include_eos:
        rows = rows.assign(mean_entropy=np.nan)
        selection = Selection(rows, selection.skipped)
    stored = rows["mean_entropy"].astype(float).to_numpy() if len(rows) else np.array([])
    missing = ~np.isfinite(stored)
    if missing.any() and teacher_forced is None:
        raise ValueError(f"{int(missing.sum())} completions lack a generation-pass entropy and "
                         "no teacher-forced route was given")
    routes = {"generation_pass": int((~missing).sum()), "teacher_forced": int(missing.sum())}
    if shard_size is None:
        if store is not None:
            raise ValueError("a shard store needs a shard_size")
        return _score_rows(rows, epsilon, teacher_forced), routes

    def compute(_index: int, part: list) -> pd.DataFrame:
        part_rows = (pd.concat([g for _, _, g in part], ignore_index=True) if part
                     else rows.iloc[0:0])
        return _score_rows(part_rows, epsilon, teacher_forced)

    frame, _stats = run_shards(store, selection.groups(), shard_size, compute)
    return frame, routes


def _score_rows(rows: pd.DataFrame, epsilon: float,
                teacher_forced: EntropyFn | None) -> pd.DataFrame:
    stored = rows["mean_entropy"].astype(float).to_numpy() if len(rows) else np.array([])
    missing = ~np.isfinite(stored)
    entropies = stored.copy()
    for i in np.flatnonzero(missing):
        row = rows.iloc[i]
        entropies[i] = teacher_forced(row["prompt"], row["completion"], row["finish_reason"])
    scores = [1.0 / max(h, epsilon) for h in entropies]
    if not all(math.isfinite(s) for s in scores):
        raise ValueError("a non-finite entropy score: an entropy was NaN or infinite")
    return score_frame(rows, "entropy", scores, {"mean_entropy": entropies})
