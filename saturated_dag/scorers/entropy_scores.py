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
import polars as pl

from saturated_dag.infra.shards import ShardStore, run_shards
from saturated_dag.scorers.scored_completions import ScoredCompletions, score_frame

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
    completions: ScoredCompletions,
    epsilon: float = 1e-8,
    teacher_forced: EntropyFn | None = None,
    store: ShardStore | None = None,
    shard_size: int | None = None,
    include_eos: bool = True,
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Scores plus route counts. ``teacher_forced`` is needed only when H-bar is missing (and
    called only for shards not already in ``store``: ``shard_size`` questions per shard).

    ``include_eos=False``: the generation pass's H-bar includes the EOS step, so every
    completion is recomputed teacher-forced (``teacher_forced`` must then leave the EOS out).
    """
    rows = completions.rows
    if not include_eos:
        rows = rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("mean_entropy"))
        completions = ScoredCompletions(rows, completions.skipped)
    missing = missing_entropies(rows)
    if missing and teacher_forced is None:
        raise ValueError(f"{missing} completions lack a generation-pass entropy and "
                         "no teacher-forced route was given")
    routes = {"generation_pass": rows.height - missing, "teacher_forced": missing}
    if shard_size is None:
        if store is not None:
            raise ValueError("a shard store needs a shard_size")
        return _score_rows(rows, epsilon, teacher_forced), routes

    def compute(_index: int, part: list) -> pl.DataFrame:
        part_rows = (pl.concat([g for _, _, g in part], how="vertical") if part
                     else rows.head(0))
        return _score_rows(part_rows, epsilon, teacher_forced)

    frame, _stats = run_shards(store, completions.groups(), shard_size, compute)
    return frame, routes


def missing_entropies(rows: pl.DataFrame) -> int:
    """Selected rows without a finite generation-pass H-bar (null or NaN): the ones the
    teacher-forced route recomputes. The asset asks this to decide whether to load a model."""
    return int((~np.isfinite(_stored_entropies(rows))).sum())


def _stored_entropies(rows: pl.DataFrame) -> np.ndarray:
    """The generation pass's H-bar per row as floats; null (how Parquet keeps a missing value)
    and NaN both read as NaN, i.e. missing."""
    return rows["mean_entropy"].cast(pl.Float64).fill_null(float("nan")).to_numpy().copy()


def _score_rows(rows: pl.DataFrame, epsilon: float,
                teacher_forced: EntropyFn | None) -> pl.DataFrame:
    entropies = _stored_entropies(rows)
    for i in np.flatnonzero(~np.isfinite(entropies)):
        row = rows.row(int(i), named=True)
        entropies[i] = teacher_forced(row["prompt"], row["completion"], row["finish_reason"])
    scores = [1.0 / max(h, epsilon) for h in entropies]
    if not all(math.isfinite(s) for s in scores):
        raise ValueError("a non-finite entropy score: an entropy was NaN or infinite")
    return score_frame(rows, "entropy", scores, {"mean_entropy": entropies})
