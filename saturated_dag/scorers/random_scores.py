"""The paper's random baseline: uniform scores, seeded per question.

Why per question: a question's scores depend only on (seed, question_id), so adding or
removing other questions never changes them.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from saturated_dag.scorers.selection import Selection, score_frame


def random_scores(selection: Selection, seed: int = 0) -> pd.DataFrame:
    """One U(0, 1) score per selected completion."""
    parts = []
    for qid, _split, rows in selection.groups():
        rng = np.random.default_rng([seed, zlib.crc32(qid.encode("utf-8"))])
        parts.append(score_frame(rows, "random", rng.random(len(rows))))
    if not parts:
        return score_frame(selection.rows, "random", [])
    return pd.concat(parts, ignore_index=True)
