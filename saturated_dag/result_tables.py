"""Result tables in the shape of the paper's: pass@1 and pass@8 per method and scorer (Tables
1, 2, 3, 7) or per sweep value (Tables 8, 9, Figure 6), deltas to the base model, best per
column marked. Built from per-question results, never from stored summaries. Each table names
the eval set it was measured on (column ``eval_set``; a caption line in Markdown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from saturated_dag.evaluation import summarise

METHOD_LABELS = {"sft": "SFT", "dpo": "DPO", "rrhf": "σ-RRHF", "raft": "RAFT"}
SCORER_LABELS = {None: "", "self_judge": "self-judge", "strong_judge": "strong judge",
                 "entropy": "inverse entropy", "random": "random"}
EVAL_SET = "eval_set"
"""The column naming the eval set: the same on every row, so a CSV alone says what it is."""


def _with_eval_set(frame: pd.DataFrame, eval_set: str | None) -> pd.DataFrame:
    if eval_set is not None:
        frame[EVAL_SET] = eval_set
    return frame


def results_table(
    base: pd.DataFrame,
    runs: Mapping[tuple[str, str, str | None], pd.DataFrame],
    k: int = 8,
    eval_set: str | None = None,
) -> pd.DataFrame:
    """One row for the base model, then one per (split, method, scorer) run.

    ``base`` and each run are per-question (question_id, n, correct) tables on the same
    eval set, named by ``eval_set`` (``tasks.eval_set_name``); a run that does not cover the
    same questions is an error.
    """
    base_summary = summarise(base, ks=(1, k))
    rows = [{"split": "-", "method": "Base model", "scorer": "",
             "pass@1": base_summary["pass@1"], f"pass@{k}": base_summary[f"pass@{k}"]}]
    expected = set(base["question_id"])
    for (split, method, scorer), table in runs.items():
        if set(table["question_id"]) != expected:
            raise ValueError(f"eval report of {split}/{method}/{scorer} covers different "
                             "questions than the base model's")
        summary = summarise(table, ks=(1, k))
        rows.append({"split": split, "method": METHOD_LABELS.get(method, method),
                     "scorer": SCORER_LABELS.get(scorer, scorer or ""),
                     "pass@1": summary["pass@1"], f"pass@{k}": summary[f"pass@{k}"]})
    frame = pd.DataFrame(rows)
    for col in ("pass@1", f"pass@{k}"):
        frame[f"Δ {col}"] = frame[col] - base_summary[col]
    return _with_eval_set(frame, eval_set)


def sweep_table(
    base: pd.DataFrame,
    split: str,
    rows: Sequence[tuple[str, Mapping[str, Any], pd.DataFrame]],
    k: int = 8,
    eval_set: str | None = None,
) -> pd.DataFrame:
    """A sweep's table: the base model, then one row per (label, settings, eval report).

    The settings (λ, β, learning rate, best epoch...) become columns, in the given order;
    ``eval_set`` names the eval set, as in ``results_table``.
    """
    base_summary = summarise(base, ks=(1, k))
    expected = set(base["question_id"])
    records: list[dict[str, Any]] = [{"split": "-", "run": "Base model",
                                      "pass@1": base_summary["pass@1"],
                                      f"pass@{k}": base_summary[f"pass@{k}"]}]
    for label, settings, table in rows:
        if set(table["question_id"]) != expected:
            raise ValueError(f"eval report of {label} covers different questions than the "
                             "base model's")
        summary = summarise(table, ks=(1, k))
        records.append({"split": split, "run": label, **settings,
                        "pass@1": summary["pass@1"], f"pass@{k}": summary[f"pass@{k}"]})
    frame = pd.DataFrame(records)
    given = [v for _, settings, _ in rows for v in settings.items() if v[1] is not None]
    for col in {key for key, _ in given}:  # integer settings (best epoch) stay integers
        if all(isinstance(v, int) and not isinstance(v, bool) for key, v in given if key == col):
            frame[col] = frame[col].astype("Int64")
    metrics = ["pass@1", f"pass@{k}"]
    frame = frame[[c for c in frame.columns if c not in metrics] + metrics]
    for col in metrics:
        frame[f"Δ {col}"] = frame[col] - base_summary[col]
    return _with_eval_set(frame, eval_set)


def eval_set_caption(frame: pd.DataFrame) -> str:
    """``Eval set: <name>`` for a table that names its eval set, else an empty string."""
    if EVAL_SET not in frame.columns or frame.empty:
        return ""
    return f"Eval set: {frame[EVAL_SET].iloc[0]}"


def to_markdown(frame: pd.DataFrame) -> str:
    """Values in %, deltas signed, the best value of each column (per split) in bold.

    The table alone: the eval set is its caption (``eval_set_caption``), not a column.
    """
    frame = frame.drop(columns=[EVAL_SET], errors="ignore")
    metric_cols = [c for c in frame.columns if c.startswith("pass@")]
    shown = frame.copy().astype(object).where(frame.notna(), "")
    for col in metric_cols:
        shown[col] = frame[col].map(lambda v: f"{v:.2f}")
        shown[f"Δ {col}"] = frame[f"Δ {col}"].map(lambda v: f"{v:+.2f}")
        for _split, rows in frame[frame["split"] != "-"].groupby("split"):
            for i in rows.index[rows[col] == rows[col].max()]:
                shown.loc[i, col] = f"**{frame.loc[i, col]:.2f}**"
    return shown.to_markdown(index=False, disable_numparse=True)
