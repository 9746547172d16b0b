"""What training changed, not only whether it helped: per-cell behaviour of each eval report.

From the per-sample eval reports (``evaluation.evaluate_samples``), for the base model and each
adapter, per cell of the eval set: pass@1, mean completion length (tokens), mean token entropy,
the answer-format rate (a stated answer was extracted) and the share of truncated completions,
each with its Δ to the base model in the same cell. On the embedded arithmetic model, whose
solution styles are known (``tasks.solution_styles.detect_style``), also the mix of styles and each
style's accuracy per cell, so a scorer that shifts mass between styles can be seen doing it:
a style that is right 77% of the time on one-digit cells and under 10% on two-digit ones can
move the first and not the second.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl

from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.evaluation.statistics import LEVEL, Interval, paired_delta, seed_matrix
from saturated_dag.reporting.result_tables import with_interval
from saturated_dag.schemas import BEHAVIOUR_MEASURES as _MEASURES

BASE = "base model"


def _answered() -> pl.Expr:
    return pl.col("answer").is_not_null() & (pl.col("answer") != "")


def behaviour_by_cell(samples: pl.DataFrame) -> pl.DataFrame:
    """One row per cell: samples, pass@1 (%), mean tokens, mean entropy, answer and
    truncation rates (%), in cell order."""
    if samples.is_empty():
        raise ValueError("an eval report without samples has no behaviour to describe")
    return (samples.group_by("cell", maintain_order=True)
            .agg(samples=pl.len().cast(pl.Int64),
                 **{"pass@1": 100 * pl.col("correct").cast(pl.Float64).mean()},
                 mean_tokens=pl.col("num_tokens").cast(pl.Float64).mean(),
                 mean_entropy=pl.col("mean_entropy").mean(),
                 answer_rate=100 * _answered().cast(pl.Float64).mean(),
                 truncated_rate=100 * (pl.col("finish_reason") == "length")
                 .cast(pl.Float64).mean())
            .sort("cell"))


def _cell_delta_intervals(base_q: pl.DataFrame, run: pl.DataFrame, name: str
                          ) -> dict[str, Interval]:
    """Per cell: Δ pass@1 (points) with its paired bootstrap interval over the cell's
    questions, and over the adapter's data seeds and each one's training seeds when it has
    several (``statistics.seed_matrix`` groups them, ``statistics.paired_delta`` resamples
    data seeds first)."""
    run_q = per_question_results(run)  # base_q: the base model's, computed once by the caller
    if set(base_q["question_id"]) != set(run_q["question_id"]):
        raise ValueError(f"eval report of {name} covers other questions than the base model's")
    out = {}
    for (cell,), group in base_q.sort("cell", "question_id").group_by("cell",
                                                                     maintain_order=True):
        order = group["question_id"].unique(maintain_order=True).to_list()
        run_cell = run_q.filter(pl.col("question_id").is_in(order))
        out[cell] = paired_delta(seed_matrix(run_cell, 1, order),
                                 seed_matrix(group, 1, order)).scaled(100)
    return out


def behaviour_table(base: pl.DataFrame, runs: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The base model's and every adapter's per-cell behaviour, each measure with its Δ to
    the base model in the same cell (0 on the base model's rows), and Δ pass@1's 95% interval
    paired over the cell's questions."""
    reference = behaviour_by_cell(base)
    base_q = per_question_results(base)
    frames = []
    for name, samples in {BASE: base, **runs}.items():
        found = behaviour_by_cell(samples)
        if set(found["cell"]) != set(reference["cell"]):
            raise ValueError(f"eval report of {name} covers other cells than the base model's")
        intervals = _cell_delta_intervals(base_q, samples, name)
        joined = found.join(reference.select("cell", *_MEASURES), on="cell", suffix=" base",
                            maintain_order="left")
        cells = joined["cell"].to_list()
        frames.append(joined.select(
            pl.lit(name, pl.String).alias("row"), "cell", "samples", *_MEASURES,
            *((pl.col(m) - pl.col(f"{m} base")).alias(f"Δ {m}") for m in _MEASURES),
            pl.Series("Δ pass@1 low", [intervals[c].low for c in cells], pl.Float64),
            pl.Series("Δ pass@1 high", [intervals[c].high for c in cells], pl.Float64)))
    return pl.concat(frames)


def style_table(base: pl.DataFrame, runs: Mapping[str, pl.DataFrame],
                detect: Callable[[str], str]) -> pl.DataFrame:
    """Per row, cell and style: the style's share of the cell's samples (%), its accuracy
    (%, null where the style was never used) and the share's Δ to the base model."""
    frames = []
    for name, samples in {BASE: base, **runs}.items():
        styled = samples.with_columns(
            style=pl.col("completion").map_elements(detect, return_dtype=pl.String))
        per_point = styled.group_by("cell").agg(cell_samples=pl.len())
        counts = (styled.group_by("cell", "style")
                  .agg(samples=pl.len().cast(pl.Int64),
                       accuracy=100 * pl.col("correct").cast(pl.Float64).mean())
                  .join(per_point, on="cell")
                  .with_columns(share=100 * pl.col("samples") / pl.col("cell_samples"))
                  .drop("cell_samples"))
        frames.append(counts.with_columns(pl.lit(name, pl.String).alias("row")))
    table = pl.concat(frames)
    # every (row, cell, style) that any row uses, so a style that vanished shows share 0
    combinations = (table.select("row").unique()
            .join(table.select("cell", "style").unique(), how="cross"))
    table = (combinations.join(table, on=["row", "cell", "style"], how="left")
             .with_columns(pl.col("samples").fill_null(0), pl.col("share").fill_null(0.0)))
    reference = table.filter(pl.col("row") == BASE).select("cell", "style",
                                                           base_share="share")
    order = {name: i for i, name in enumerate({BASE: None, **runs})}
    return (table.join(reference, on=["cell", "style"], how="left")
            .with_columns((pl.col("share") - pl.col("base_share")).alias("Δ share"))
            .drop("base_share")
            .with_columns(pl.col("row").replace_strict(order, return_dtype=pl.Int64)
                          .alias("_order"))
            .sort("_order", "cell", "style").drop("_order")
            .select("row", "cell", "style", "samples", "share", "accuracy", "Δ share"))


def _signed(row: dict, measure: str = "Δ pass@1") -> str:
    return with_interval(f"{row[measure]:+.2f}", row.get(f"{measure} low"),
                         row.get(f"{measure} high"), signed=True)


def summary(table: pl.DataFrame) -> str:
    """``behaviour_table``'s answer in Markdown, for the top of its page: how many adapter ×
    cell pairs lie below and above the base model on pass@1 (their 95% paired interval over
    the cell's questions excludes 0), the largest drop and gain with their intervals, the
    range of length changes, and the sample per cell.

    Why it names the number of tests: the pairs are not corrected for multiplicity, so about
    5% of them exclude 0 by chance when nothing changed; the count is read against that."""
    runs = table.filter(pl.col("row") != BASE)
    if runs.is_empty():
        return "Only the base model: no adapter to compare."
    pairs = runs.height
    below = int((runs["Δ pass@1 high"] < 0).sum())
    above = int((runs["Δ pass@1 low"] > 0).sum())
    worst = runs.row(int(runs["Δ pass@1"].arg_min() or 0), named=True)
    best = runs.row(int(runs["Δ pass@1"].arg_max() or 0), named=True)
    extremes = []
    if worst["Δ pass@1"] < 0:
        extremes.append(f"largest drop {worst['row']} on {worst['cell']}, {_signed(worst)}")
    if best["Δ pass@1"] > 0:
        extremes.append(f"largest gain {best['row']} on {best['cell']}, {_signed(best)}")
    tokens = runs["Δ mean_tokens"]
    low, high = int(runs["samples"].min()), int(runs["samples"].max())
    adapters, cells = runs["row"].n_unique(), runs["cell"].n_unique()
    lines = [
        f"**Δ pass@1: {below} of {pairs} adapter × cell pairs below the base model, {above} "
        f"above** ({adapters} adapter{'s' if adapters != 1 else ''} × {cells} "
        f"cell{'s' if cells != 1 else ''}; a pair "
        "counts when its 95% paired interval over the cell's questions excludes 0; not "
        f"corrected for the {pairs} tests, so about {(1 - LEVEL) * pairs:.1f} may by chance).",
        ("; ".join(extremes) or "no pair changed its point estimate") + " (points).",
        f"Δ mean tokens from {tokens.min():+.2f} to {tokens.max():+.2f} (no interval). "
        f"Sample: {low if low == high else f'{low}-{high}'} samples per cell.",
    ]
    return "\n\n".join(lines)
