"""How far scorers agree (the paper's judge-agreement table and Figure 4).

Within each question, the completions that two scorers both scored are ranked by each and
compared with Spearman's rho (scipy; ties get average ranks). Per task and split the table
reports mean, median and % positive rho over questions. A question contributes only when rho
is defined: fewer than ``min_points`` shared completions, or a constant score vector (all
ties, rho undefined), skips it by rule and is counted, so no table cell is ever NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

from saturated_dag.infra.atomic import atomic_save_figure
from saturated_dag.schemas import schema
from saturated_dag.scorers.judges import chain_sum_expression
from saturated_dag.scorers.rubric import rubric_score
from saturated_dag.scorers.scored_completions import ScoredCompletions, score_frame, sorted_groups

OK, TOO_FEW, CONSTANT = "ok", "too_few", "constant"
PER_QUESTION_SCHEMA = schema("scorer_agreement")  # declared once, in saturated_dag/schemas.py
"""``rho`` is null where the status is not ``ok``."""
SUMMARY_SCHEMA = {"split": pl.String, "scorer_a": pl.String, "scorer_b": pl.String,
                  "questions": pl.Int64, "mean_rho": pl.Float64, "median_rho": pl.Float64,
                  "pct_positive": pl.Float64, "skipped_too_few": pl.Int64,
                  "skipped_constant": pl.Int64}
"""The three statistics are null for a pair with no question of defined rho."""
SUMMARY_COLUMNS = list(SUMMARY_SCHEMA)


def rubric_scores(completions: ScoredCompletions) -> pl.DataFrame:
    """The chain-sum rubric as one more scorer (the ground truth every scorer is held to)."""
    rows = completions.rows
    scores = [rubric_score(c, chain_sum_expression(p))
              for c, p in zip(rows["completion"].to_list(), rows["problem"].to_list(),
                              strict=True)]
    return score_frame(rows, "rubric", scores)


def question_rho(a: np.ndarray, b: np.ndarray, min_points: int = 3) -> tuple[float | None, str]:
    """Spearman rho of two aligned score vectors, or ``None`` with the reason."""
    if len(a) < min_points:
        return None, TOO_FEW
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, CONSTANT
    from scipy.stats import spearmanr  # 0.7 s to import: not when the definitions load

    rho = spearmanr(a, b).statistic
    if not np.isfinite(rho):
        return None, CONSTANT
    return float(rho), OK


KEYS = ["question_id", "split", "sample_index"]


def _scored(frame: pl.DataFrame, correct_only: bool, suffix: str) -> pl.DataFrame:
    """One scorer's ``(question, split, sample, score)``, its score named ``score_<suffix>``."""
    keep = frame.filter(pl.col("correct").cast(pl.Boolean)) if correct_only else frame
    return keep.select(pl.col("question_id").cast(pl.String), pl.col("split").cast(pl.String),
                       pl.col("sample_index").cast(pl.Int64),
                       pl.col("score").cast(pl.Float64).alias(f"score_{suffix}"))


def per_question_rho(scores: Mapping[str, pl.DataFrame], correct_only: bool = True,
                     min_points: int = 3) -> pl.DataFrame:
    """One row per (question, scorer pair): rho, shared completions and status.

    Pairs in sorted name order, then questions by ``(question_id, split)``; each question's
    completions keep the first scorer's row order.
    """
    rows = []
    for name_a, name_b in combinations(sorted(scores), 2):
        joined = _scored(scores[name_a], correct_only, "a").join(
            _scored(scores[name_b], correct_only, "b"), on=KEYS, how="inner",
            maintain_order="left")
        for (qid, split), group in sorted_groups(joined, ["question_id", "split"]):
            rho, status = question_rho(group["score_a"].to_numpy(),
                                       group["score_b"].to_numpy(), min_points)
            rows.append({"question_id": qid, "split": split, "scorer_a": name_a,
                         "scorer_b": name_b, "n": group.height, "rho": rho, "status": status})
    return pl.DataFrame(rows, schema=PER_QUESTION_SCHEMA)


def summarize(per_question: pl.DataFrame, scorers: list[str],
              splits: list[str]) -> pl.DataFrame:
    """Table rows per (split, scorer pair), including pairs with no defined question.

    The statistics are numpy's over the question rhos in table order (the same sums as
    before the polars port, so the rounded values cannot move).
    """
    out = []
    for split in splits:
        for a, b in combinations(sorted(scorers), 2):
            sel = per_question.filter((pl.col("split") == split) & (pl.col("scorer_a") == a)
                                      & (pl.col("scorer_b") == b))
            rho = sel.filter(pl.col("status") == OK)["rho"].cast(pl.Float64).to_numpy()
            status = sel["status"]
            out.append({
                "split": split, "scorer_a": a, "scorer_b": b, "questions": len(rho),
                "mean_rho": round(float(np.mean(rho)), 4) if len(rho) else None,
                "median_rho": round(float(np.median(rho)), 4) if len(rho) else None,
                "pct_positive": round(float(100 * np.mean(rho > 0)), 1) if len(rho) else None,
                "skipped_too_few": int((status == TOO_FEW).sum()),
                "skipped_constant": int((status == CONSTANT).sum()),
            })
    return pl.DataFrame(out, schema=SUMMARY_SCHEMA)


def summary_display(summary: pl.DataFrame) -> pl.DataFrame:
    """The summary as the paper lays it out, for a table in the UI: one ``scorers`` column
    (``a vs b``), ρ to three decimals, % positive to one; null where no question had a
    defined ρ. The skipped questions' counts are in the summary itself (CSV, Markdown)."""
    return summary.select(
        "split",
        pl.concat_str("scorer_a", pl.lit(" vs "), "scorer_b").alias("scorers"),
        "questions",
        pl.col("mean_rho").round(3).alias("mean ρ"),
        pl.col("median_rho").round(3).alias("median ρ"),
        pl.col("pct_positive").round(1).alias("% ρ > 0"))


def summary_markdown(summary: pl.DataFrame, title: str) -> str:
    """The paper's layout; an undefined cell reads ``n/a`` (no question had a defined rho)."""
    header = ["split", "scorers", "questions", "mean rho", "median rho", "% positive",
              "skipped (<3 shared)", "skipped (constant)"]
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]

    def cell(value: object, fmt: str) -> str:
        undefined = value is None or (isinstance(value, float) and math.isnan(value))
        return "n/a" if undefined else format(value, fmt)

    for r in summary.iter_rows(named=True):
        lines.append(
            f"| {r['split']} | {r['scorer_a']} vs {r['scorer_b']} | {r['questions']} | "
            f"{cell(r['mean_rho'], '.3f')} | {cell(r['median_rho'], '.3f')} | "
            f"{cell(r['pct_positive'], '.1f')} | {r['skipped_too_few']} | "
            f"{r['skipped_constant']} |")
    return "\n".join(lines) + "\n"


def rho_figure(per_question: pl.DataFrame, path: Path, title: str) -> Path:
    """Box plots of within-question rho per scorer pair, one panel per split (Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = per_question.filter(pl.col("status") == OK)
    splits = sorted(ok["split"].unique().to_list()) or ["(none)"]
    pairs = max(1, ok.select("scorer_a", "scorer_b").unique().height)
    # horizontal boxes: a pair's name is one line of its own, never overlapping its neighbour
    fig, axes = plt.subplots(len(splits), 1, figsize=(7.2, len(splits) * (0.45 * pairs + 1.2)),
                             squeeze=False)
    for ax, split in zip(axes[:, 0], splits, strict=True):
        sel = ok.filter(pl.col("split") == split)
        labels, data = [], []
        for (a, b), group in sorted_groups(sel, ["scorer_a", "scorer_b"]):
            labels.append(f"{a} vs {b} (n={group.height})")
            data.append(group["rho"].cast(pl.Float64).to_numpy())
        if data:
            ax.boxplot(data, showmeans=True, orientation="horizontal")
            ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=9)
            ax.invert_yaxis()
        else:
            ax.text(0.5, 0.5, "no question with a defined rho", ha="center", va="center",
                    transform=ax.transAxes)
        ax.axvline(0.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlim(-1.05, 1.05)
        ax.set_title(split, fontsize=10)
        ax.set_xlabel("within-question Spearman rho")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=100)  # never a half-written PNG
    plt.close(fig)
    return path


def rho_with_oracle(agreement: pl.DataFrame, split: str) -> dict[str, float]:
    """Each scorer's mean within-question Spearman ρ with the oracle on ``split``, from the
    scorer agreement table (the oracle's own is 1)."""
    part = agreement.filter((pl.col("split") == split) & pl.col("rho").is_not_null()
                            & ((pl.col("scorer_a") == "oracle") | (pl.col("scorer_b") == "oracle")))
    other = pl.when(pl.col("scorer_a") == "oracle").then("scorer_b").otherwise("scorer_a")
    means = part.group_by(other.alias("scorer")).agg(pl.col("rho").mean())
    return {"oracle": 1.0, **dict(zip(means["scorer"], means["rho"], strict=True))}
