"""The paper's random baseline: uniform scores, seeded per question.

Why per question: a question's scores depend only on (seed, question_id), so adding or
removing other questions never changes them.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl

from saturated_dag.scorers.scored_completions import ScoredCompletions, score_frame


def random_scores(completions: ScoredCompletions, seed: int = 0) -> pl.DataFrame:
    """One U(0, 1) score per selected completion, drawn question by question in
    ``completions.groups()`` order (rows by sample index)."""
    parts = []
    for qid, _split, rows in completions.groups():
        rng = np.random.default_rng([seed, zlib.crc32(qid.encode("utf-8"))])
        parts.append(score_frame(rows, "random", rng.random(rows.height)))
    if not parts:
        return score_frame(completions.rows, "random", [])
    return pl.concat(parts, how="vertical")
