"""How far scorers agree (the paper's judge-agreement table and Figure 4).

Within each question, the completions that two scorers both scored are ranked by each and
compared with Spearman's rho (scipy; ties get average ranks). Per task and split the table
reports mean, median and % positive rho over questions. A question contributes only when rho
is defined: fewer than ``min_points`` shared completions, or a constant score vector (all
ties, rho undefined), skips it by rule and is counted, so no table cell is ever NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from saturated_dag.atomic import atomic_save_figure
from saturated_dag.scorers.judges import chain_sum_expression, load_rubric_score
from saturated_dag.scorers.selection import Selection, score_frame

OK, TOO_FEW, CONSTANT = "ok", "too_few", "constant"
SUMMARY_COLUMNS = ["split", "scorer_a", "scorer_b", "questions", "mean_rho", "median_rho",
                   "pct_positive", "skipped_too_few", "skipped_constant"]


def rubric_scores(selection: Selection) -> pd.DataFrame:
    """The chain-sum rubric as one more scorer (the ground truth every scorer is held to)."""
    rubric_score = load_rubric_score()
    rows = selection.rows
    scores = [rubric_score(c, chain_sum_expression(p))
              for c, p in zip(rows["completion"], rows["problem"], strict=True)]
    return score_frame(rows, "rubric", scores)


def question_rho(a: np.ndarray, b: np.ndarray, min_points: int = 3) -> tuple[float | None, str]:
    """Spearman rho of two aligned score vectors, or ``None`` with the reason."""
    if len(a) < min_points:
        return None, TOO_FEW
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, CONSTANT
    rho = spearmanr(a, b).statistic
    if not np.isfinite(rho):
        return None, CONSTANT
    return float(rho), OK


def per_question_rho(scores: Mapping[str, pd.DataFrame], correct_only: bool = True,
                     min_points: int = 3) -> pd.DataFrame:
    """One row per (question, scorer pair): rho, shared completions and status."""
    frames = {}
    for name, frame in scores.items():
        keep = frame[frame["correct"].astype(bool)] if correct_only else frame
        frames[name] = keep[["question_id", "split", "sample_index", "score"]]
    rows = []
    for name_a, name_b in combinations(sorted(frames), 2):
        joined = frames[name_a].merge(frames[name_b], on=["question_id", "split", "sample_index"],
                                      suffixes=("_a", "_b"))
        for (qid, split), group in joined.groupby(["question_id", "split"], sort=True):
            rho, status = question_rho(group["score_a"].to_numpy(float),
                                       group["score_b"].to_numpy(float), min_points)
            rows.append({"question_id": qid, "split": split, "scorer_a": name_a,
                         "scorer_b": name_b, "n": len(group), "rho": rho, "status": status})
    columns = ["question_id", "split", "scorer_a", "scorer_b", "n", "rho", "status"]
    return pd.DataFrame(rows, columns=columns)


def summarize(per_question: pd.DataFrame, scorers: list[str],
              splits: list[str]) -> pd.DataFrame:
    """Table rows per (split, scorer pair), including pairs with no defined question."""
    out = []
    for split in splits:
        for a, b in combinations(sorted(scorers), 2):
            sel = per_question[(per_question["split"] == split) & (per_question["scorer_a"] == a)
                               & (per_question["scorer_b"] == b)]
            rho = sel.loc[sel["status"] == OK, "rho"].astype(float)
            out.append({
                "split": split, "scorer_a": a, "scorer_b": b, "questions": len(rho),
                "mean_rho": round(float(rho.mean()), 4) if len(rho) else None,
                "median_rho": round(float(rho.median()), 4) if len(rho) else None,
                "pct_positive": round(float(100 * (rho > 0).mean()), 1) if len(rho) else None,
                "skipped_too_few": int((sel["status"] == TOO_FEW).sum()),
                "skipped_constant": int((sel["status"] == CONSTANT).sum()),
            })
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def summary_markdown(summary: pd.DataFrame, title: str) -> str:
    """The paper's layout; an undefined cell reads ``n/a`` (no question had a defined rho)."""
    header = ["split", "scorers", "questions", "mean rho", "median rho", "% positive",
              "skipped (<3 shared)", "skipped (constant)"]
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]

    def cell(value: object, fmt: str) -> str:
        return "n/a" if value is None or pd.isna(value) else format(value, fmt)

    for r in summary.itertuples(index=False):
        lines.append(
            f"| {r.split} | {r.scorer_a} vs {r.scorer_b} | {r.questions} | "
            f"{cell(r.mean_rho, '.3f')} | {cell(r.median_rho, '.3f')} | "
            f"{cell(r.pct_positive, '.1f')} | {r.skipped_too_few} | {r.skipped_constant} |")
    return "\n".join(lines) + "\n"


def rho_figure(per_question: pd.DataFrame, path: Path, title: str) -> Path:
    """Box plots of within-question rho per scorer pair, one panel per split (Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = per_question[per_question["status"] == OK]
    splits = sorted(ok["split"].unique()) or ["(none)"]
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 4), squeeze=False)
    for ax, split in zip(axes[0], splits, strict=True):
        sel = ok[ok["split"] == split]
        labels, data = [], []
        for (a, b), group in sel.groupby(["scorer_a", "scorer_b"], sort=True):
            labels.append(f"{a}\nvs {b}\n(n={len(group)})")
            data.append(group["rho"].astype(float).to_numpy())
        if data:
            ax.boxplot(data, showmeans=True)
            ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
        else:
            ax.text(0.5, 0.5, "no question with a defined rho", ha="center", va="center",
                    transform=ax.transAxes)
        ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylim(-1.05, 1.05)
        ax.set_title(split)
        ax.set_ylabel("within-question Spearman rho")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=100)  # never a half-written PNG
    plt.close(fig)
    return path
