"""Result tables in the shape of the paper's: pass@1 and pass@8 per method and scorer (Tables
1, 2, 3, 7) or per sweep value (Tables 8, 9, Figure 6), deltas to the base model, best per
column marked. Built from per-question results, never from stored summaries. Each table names
the eval set it was measured on (column ``eval_set``; a caption line in Markdown). Frames are
polars: eval reports in, tables out.

Every value comes with its 95% interval (columns ``<metric> low``/``high``) and every Δ with
its paired one (``Δ <metric> low``/``high``, ``Δ <metric> excludes 0``), from the bootstrap of
``saturated_dag.evaluation.statistics`` over each row's data seeds, the training seeds of each
data seed and the eval questions, each question's value averaged over the eval replicates
(``docs/statistics.md``); ``questions``, ``replicates`` (eval), ``training replicates`` (per
data seed) and ``data seeds`` say what they were computed on, and the caption
(``eval_set_caption``) says it in words: with one data seed per row (the demo) the data's draw
is not in the intervals. A table's rows are one family of tests of Δ = 0 per metric: each Δ
also has its bootstrap p-value (``Δ <metric> p``) and Holm's family-wise adjustment of it over
the table's rows (``Δ <metric> Holm p``); ``*`` marks a raw interval that excludes 0, ``†`` a
Δ that also survives the correction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl
from tabulate import tabulate

from saturated_dag.evaluation.reports import summarise
from saturated_dag.evaluation.statistics import (
    LEVEL,
    bootstrap_mean,
    holm,
    paired_delta,
    seed_matrix,
)
from saturated_dag.methods import label as method_label
from saturated_dag.reporting.labels import scientific

SCORER_LABELS: dict[str | None, str] = {None: ""}
"""A scorer prints as its name (``self_judge``, ``strong_judge``, ``entropy``, ...): one name
per thing in files, tables, figures and docs (``docs/glossary.md``); no scorer is empty."""
EVAL_SET = "eval_set"
"""The column naming the eval set: the same on every row, so a CSV alone says what it is."""


def _metrics(k: int) -> list[str]:
    return list(dict.fromkeys(["pass@1", f"pass@{k}"]))  # k = 1: one column, not two


def _eval_replicates(report: pl.DataFrame) -> int:
    return report["replicate"].n_unique() if "replicate" in report.columns else 1


def _finish(frame: pl.DataFrame, base_summary: Mapping[str, float], k: int,
            eval_set: str | None, base: pl.DataFrame,
            reports: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Δ to the base model for each metric, every value's and Δ's 95% interval, the sample
    they rest on (``training replicates``: training seeds per data seed; ``data seeds``), then
    the eval set's name (when given). ``reports`` are the rows' eval reports in row order, the
    base model's first."""
    metrics = _metrics(k)
    frame = frame.with_columns((pl.col(col) - base_summary[col]).alias(f"Δ {col}")
                               for col in metrics)
    order = base["question_id"].unique(maintain_order=True).to_list()  # pairs line up
    columns: dict[str, list[Any]] = {}
    for col in metrics:
        at = int(col.removeprefix("pass@"))
        # eval replicates are more samples of the same adapter: each question's value is its
        # mean over them; data seeds and training seeds are different adapters: the bootstrap
        # resamples data seeds, each one's training seeds, and the questions (three levels,
        # docs/statistics.md)
        base_values = seed_matrix(base, at, order)
        values = [seed_matrix(r, at, order) for r in reports]
        columns[col] = [bootstrap_mean(v).scaled(100) for v in values]
        columns[f"Δ {col}"] = [paired_delta(v, base_values).scaled(100) for v in values]
    intervals = [pl.Series(f"{name} {end}", [getattr(i, end) for i in found], pl.Float64)
                 for name in (*metrics, *(f"Δ {m}" for m in metrics))
                 for end, found in (("low", columns[name]), ("high", columns[name]))]
    excludes = [pl.Series(f"Δ {m} excludes 0", [i.excludes_zero for i in columns[f"Δ {m}"]],
                          pl.Boolean) for m in metrics]
    tests = []
    for m in metrics:  # the base model's row tests nothing: its Δ is 0 by construction
        raw = [None, *(i.p for i in columns[f"Δ {m}"][1:])]
        tests += [pl.Series(f"Δ {m} p", raw, pl.Float64),
                  pl.Series(f"Δ {m} Holm p", holm(raw), pl.Float64)]
    sample = columns[metrics[0]]
    frame = frame.with_columns(
        *intervals, *excludes, *tests,
        pl.Series("questions", [i.questions for i in sample], pl.Int64),
        pl.Series("replicates", [_eval_replicates(r) for r in reports], pl.Int64),
        pl.Series("training replicates", [i.replicates for i in sample], pl.Int64),
        pl.Series(DATA_SEEDS, [i.data_seeds for i in sample], pl.Int64))
    if eval_set is not None:
        frame = frame.with_columns(pl.lit(eval_set, dtype=pl.String).alias(EVAL_SET))
    return frame


def _same_questions(table: pl.DataFrame, expected: set[Any], name: str) -> None:
    if set(table["question_id"]) != expected:
        raise ValueError(f"eval report of {name} covers different questions than the base "
                         "model's")


def results_table(
    base: pl.DataFrame,
    runs: Mapping[tuple[str, str, str | None], pl.DataFrame],
    k: int = 8,
    eval_set: str | None = None,
) -> pl.DataFrame:
    """One row for the base model, then one per (split, method, scorer) run.

    ``base`` and each run are per-question (question_id, n, correct) tables on the same
    eval set, named by ``eval_set`` (``tasks.eval_set_name``); a run that does not cover the
    same questions is an error.
    """
    metrics = _metrics(k)
    base_summary = summarise(base, ks=(1, k))
    rows = [{"split": "-", "method": "Base model", "scorer": "",
             **{m: base_summary[m] for m in metrics}}]
    expected = set(base["question_id"])
    reports = [base]
    for (split, method, scorer), table in runs.items():
        _same_questions(table, expected, f"{split}/{method}/{scorer}")
        reports.append(table)
        summary = summarise(table, ks=(1, k))
        rows.append({"split": split, "method": method_label(method),
                     "scorer": SCORER_LABELS.get(scorer, scorer or ""),
                     **{m: summary[m] for m in metrics}})
    schema = {"split": pl.String, "method": pl.String, "scorer": pl.String,
              **{m: pl.Float64 for m in metrics}}
    return _finish(pl.DataFrame(rows, schema=schema), base_summary, k, eval_set, base, reports)


def _setting_dtype(values: list[Any]) -> pl.DataType:
    """A settings column's type from its given (non-null) values, as pandas inferred it:
    integers stay integers (best epoch), numbers mixed with integers are floats."""
    if not values:
        return pl.Null()
    if all(isinstance(v, bool) for v in values):
        return pl.Boolean()
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return pl.Int64()
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return pl.Float64()
    if all(isinstance(v, str) for v in values):
        return pl.String()
    raise ValueError(f"sweep setting values of mixed types: {values!r}")


def _column(name: str, values: list[Any], dtype: Any) -> pl.Series:
    """A column of ``dtype``; integers in a float column become floats (as pandas made them),
    any other value that does not fit is an error naming the column."""
    if dtype == pl.Float64 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                   for v in values if v is not None):
        values = [None if v is None else float(v) for v in values]
    try:
        return pl.Series(name, values, dtype=dtype, strict=True)
    except (TypeError, pl.exceptions.PolarsError) as err:
        raise ValueError(f"sweep column {name!r} cannot hold {values!r} as {dtype}") from err


def sweep_table(
    base: pl.DataFrame,
    split: str,
    rows: Sequence[tuple[str, Mapping[str, Any], pl.DataFrame]],
    k: int = 8,
    eval_set: str | None = None,
    setting_dtypes: Mapping[str, pl.DataType | type[pl.DataType]] | None = None,
) -> pl.DataFrame:
    """A sweep's table: the base model, then one row per (label, settings, eval report).

    The settings (λ, β, learning rate, best epoch...) become columns, in the given order
    (null on the base model's row); ``eval_set`` names the eval set, as in ``results_table``.
    A setting's dtype is inferred from its values (integers stay integers) unless
    ``setting_dtypes`` names it; that mapping may be a whole declared schema (names that are
    not settings are ignored), and is what gives a setting that is null on every row (no
    best epoch recorded) its declared dtype rather than ``Null``.
    """
    metrics = _metrics(k)
    base_summary = summarise(base, ks=(1, k))
    expected = set(base["question_id"])
    records: list[dict[str, Any]] = [{"split": "-", "run": "Base model",
                                      **{m: base_summary[m] for m in metrics}}]
    reports = [base]
    for label, settings, table in rows:
        _same_questions(table, expected, label)
        reports.append(table)
        summary = summarise(table, ks=(1, k))
        records.append({"split": split, "run": label, **settings,
                        **{m: summary[m] for m in metrics}})
    names = [key for _, settings, _ in rows for key in settings if key not in metrics]
    names = [key for key in dict.fromkeys(names) if key not in ("split", "run")]
    schema: dict[str, Any] = {"split": pl.String, "run": pl.String}
    declared = setting_dtypes or {}
    for key in names:
        schema[key] = declared[key] if key in declared else _setting_dtype(
            [r[key] for r in records if r.get(key) is not None])
    schema.update({m: pl.Float64 for m in metrics})
    columns = {name: _column(name, [r.get(name) for r in records], dtype)
               for name, dtype in schema.items()}
    return _finish(pl.DataFrame(list(columns.values())), base_summary, k, eval_set, base,
                   reports)


def _count(values: pl.Series) -> str:
    """``3``, or ``2-3`` when the rows differ."""
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}-{high}"


def _adapter_counts(frame: pl.DataFrame) -> tuple[pl.Series, pl.Series] | None:
    """The adapter rows' training seeds per data seed and data seeds (the base model's row
    left out: no data trained it); None for a table of the base model alone. A table written
    before data seeds has no ``data seeds`` column: one data seed per row."""
    if "training replicates" not in frame.columns or frame.height < 2:
        return None
    seeds = frame["training replicates"][1:]
    data = (frame[DATA_SEEDS][1:] if DATA_SEEDS in frame.columns
            else pl.Series(DATA_SEEDS, [1] * len(seeds), pl.Int64))
    return seeds, data


DATA_DRAW_NOT_COVERED = (
    "The data's draw is not in the intervals: each adapter row was trained on one data seed "
    "(one draw of which training questions were used and which completions were sampled and "
    "scored), so a redraw of the training data could move a row by more than its interval "
    "shows.")
"""The caption's sentence for a table whose rows each have one data seed (the demo)."""


def _over_seeds(frame: pl.DataFrame) -> str:
    """The caption's clause on the adapters' seeds: data seeds × training seeds with their
    counts when a row has several data seeds, training seeds alone otherwise."""
    counts = _adapter_counts(frame)
    if counts is None:
        return ""
    seeds, data = counts
    if data.max() > 1:
        return (f" and over the {_count(data)} data seeds × {_count(seeds)} training seed(s) of "
                "each adapter row (data seeds resampled first, then each one's training seeds)")
    if seeds.max() > 1:
        return f" and over each adapter's {_count(seeds)} training seeds"
    return ""


def one_data_seed(frame: pl.DataFrame) -> bool:
    """Whether every adapter row of the table rests on one data seed (the demo): its
    intervals then leave the data's draw out, and its caption says so."""
    counts = _adapter_counts(frame)
    return counts is not None and counts[1].max() <= 1


def eval_set_caption(frame: pl.DataFrame) -> str:
    """``Eval set: <name>`` and, on a line of its own, what the intervals rest on, for a
    table that carries them: the eval questions and replicates, each adapter row's data seeds
    × training seeds with their counts, and, when every row has one data seed, that the data's
    draw is not in the intervals (``DATA_DRAW_NOT_COVERED``)."""
    parts = []
    if EVAL_SET in frame.columns and not frame.is_empty():
        parts.append(f"Eval set: {frame[EVAL_SET][0]}")
    if INTERVALS in frame.columns and not frame.is_empty():
        questions, replicates = frame["questions"].max(), frame["replicates"].min()
        text = (f"In brackets: the 95% interval, a percentile bootstrap over the "
                f"{questions} eval questions (each averaged over its {replicates} eval "
                f"replicate(s)){_over_seeds(frame)}, paired with the base model for Δ; * marks "
                "a Δ whose interval excludes 0, † one that also holds after Holm's "
                f"correction over the table's {rows_text(frame.height - 1)} (Holm p < "
                f"{1 - LEVEL:g}; docs/statistics.md)")
        if one_data_seed(frame):
            text += f". {DATA_DRAW_NOT_COVERED}"
        parts.append(text)
    return "\n".join(parts)


INTERVALS = "replicates"
"""A column present only in tables that carry intervals."""

DATA_SEEDS = "data seeds"
"""The column counting a row's data seeds (1 on the base model's row and in the demo)."""

NOT_APPLICABLE = "—"
"""A cell that has no value by construction (the base model's Δ to itself)."""

_HIDDEN = ("low", "high", "excludes 0", " p")


def significant_after_holm(frame: pl.DataFrame, delta: str) -> list[bool]:
    """Per row: the Δ's raw interval excludes 0 and its Holm-adjusted p is below 1 − level."""
    if f"{delta} Holm p" not in frame.columns:
        return [False] * frame.height
    return [bool(ex) and p is not None and p < 1 - LEVEL for ex, p in
            zip(frame[f"{delta} excludes 0"], frame[f"{delta} Holm p"], strict=True)]


def holm_text(p: float | None) -> str:
    """A Holm-adjusted p as a reader sees it: three decimals, ``<0.001`` below that."""
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def with_interval(value: str, low: float | None, high: float | None, signed: bool) -> str:
    """``value [low, high]`` with two decimals (signed for a Δ); ``value`` alone without ends."""
    if low is None or high is None:
        return value
    spec = "+.2f" if signed else ".2f"
    return f"{value} [{low:{spec}}, {high:{spec}}]"


LEARNING_RATE_COLUMNS = ("lr", "learning rate", "learning_rate", "η")
"""Setting columns that hold a learning rate: written in scientific notation (``3e-4``), as
on every page, not ``0.0003`` in one table and ``3e-4`` in the next."""


def display_rows(frame: pl.DataFrame, best: Callable[[str], str] = lambda text: f"{text} ★"
                 ) -> tuple[list[str], list[list[Any]]]:
    """The table as a reader sees it: headers and rows of text.

    Values in % with two decimals, deltas signed, each with its 95% interval beside it, the
    best value of each column (per split) passed through ``best`` (``★`` by default, bold in
    Markdown), a Δ whose interval excludes 0 marked ``*`` and ``†`` where it holds after
    Holm's correction, whose adjusted p is the column after it (``Holm p (Δ pass@k)``). The
    base model's Δ is ``NOT_APPLICABLE`` (``—``), not ``+0.00``: it is 0 by construction, not a
    measurement. The eval set and the intervals' sample are the caption
    (``eval_set_caption``), not columns; a null setting is empty.
    """
    frame = frame.drop(EVAL_SET, strict=False)
    metric_cols = [c for c in frame.columns if c.startswith("pass@")
                   and not c.endswith(_HIDDEN)]
    hidden = [c for c in frame.columns if c.endswith(_HIDDEN)
              or c in ("questions", INTERVALS, "training replicates", DATA_SEEDS)]
    shown: dict[str, list[Any]] = {
        c: ["" if v is None else scientific(v) if c in LEARNING_RATE_COLUMNS
            and isinstance(v, float | int) and not isinstance(v, bool) else v
            for v in frame[c].to_list()]
        for c in frame.columns if c not in hidden}
    splits = frame["split"].to_list()
    has = set(frame.columns)

    def ends(col: str) -> tuple[list[Any], list[Any]]:
        if f"{col} low" not in has:
            return [None] * frame.height, [None] * frame.height
        return frame[f"{col} low"].to_list(), frame[f"{col} high"].to_list()

    for col in metric_cols:
        values = frame[col].to_list()
        lows, highs = ends(col)
        text = [f"{v:.2f}" for v in values]
        for split in set(splits) - {"-"}:
            rows = [i for i, s in enumerate(splits) if s == split]
            top = max(values[i] for i in rows)
            for i in rows:
                if values[i] == top:
                    text[i] = best(f"{values[i]:.2f}")
        shown[col] = [with_interval(t, lo, hi, False)
                      for t, lo, hi in zip(text, lows, highs, strict=True)]
        delta = f"Δ {col}"
        lows, highs = ends(delta)
        marks = (frame[f"{delta} excludes 0"].to_list() if f"{delta} excludes 0" in has
                 else [False] * frame.height)
        family = significant_after_holm(frame, delta)
        shown[delta] = [
            NOT_APPLICABLE if s == "-" else  # the base model against itself: nothing to show
            with_interval(f"{v:+.2f}", lo, hi, True) + ("*" if mark else "")
            + ("†" if holds else "")
            for v, lo, hi, mark, holds, s in zip(frame[delta].to_list(), lows, highs, marks,
                                                 family, splits, strict=True)]
        if f"{delta} Holm p" in has:
            shown[holm_column(col)] = [holm_text(p) for p in frame[f"{delta} Holm p"]]
    order = [c for c in shown if not c.startswith("Holm p")]
    for col in metric_cols:  # each Holm p right after its Δ
        if holm_column(col) in shown:
            order.insert(order.index(f"Δ {col}") + 1, holm_column(col))
    shown = {c: shown[c] for c in order}
    return list(shown), [list(row) for row in zip(*shown.values(), strict=True)]


def holm_column(metric: str) -> str:
    """The display column of a metric's Holm-adjusted p."""
    return f"Holm p (Δ {metric})"


def to_markdown(frame: pl.DataFrame) -> str:
    """``display_rows`` as a Markdown table, the best value of each column in bold."""
    headers, rows = display_rows(frame, best=lambda text: f"**{text}**")
    return tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True)


def row_label(row: Mapping[str, Any]) -> str:
    """A row's name as the UI tables and figures write it: split · method · scorer, or split ·
    setting for a sweep (the base model's split ``-`` and empty parts left out)."""
    names = ("split", "run") if "run" in row else ("split", "method", "scorer")
    return " · ".join(str(row[c]) for c in names if row.get(c) not in (None, "", "-"))


def rows_text(count: int) -> str:
    """``1 row``, ``3 rows``: a count as a sentence says it (not "the table's 1 rows")."""
    return f"{count} row" if count == 1 else f"{count} rows"


SUMMARY_CHARS = 1000
"""The Dagster UI shows a Markdown value inline only below this many characters (longer ones
go behind a "[Show Markdown]" link), so a summary must stay under it to be read unclicked."""


def _directions(frame: pl.DataFrame, metric: str) -> tuple[int, int, int, int]:
    """Rows after the base model whose paired interval on Δ ``metric`` lies below 0, above 0,
    and of each, how many also hold after Holm's correction over the rows (below, above,
    below after Holm, above after Holm)."""
    runs = frame.slice(1)
    delta = f"Δ {metric}"
    below = [hi is not None and hi < 0 for hi in runs[f"{delta} high"]]
    above = [lo is not None and lo > 0 for lo in runs[f"{delta} low"]]
    holds = significant_after_holm(runs, delta)
    return (sum(below), sum(above), sum(b and h for b, h in zip(below, holds, strict=True)),
            sum(a and h for a, h in zip(above, holds, strict=True)))


def sample_text(frame: pl.DataFrame, samples: int | None = None,
                eval_set: bool = True) -> str:
    """What a table's intervals rest on, in one line: questions × samples, eval replicates and
    the adapters' data seeds × training seeds (``samples``: completions per question, when
    known), and how the eval set was made (``eval_set``; a page that shows it as its own
    entry leaves it out of the summary)."""
    questions = int(frame["questions"].max())
    text = f"{questions} eval questions" + (f" × {samples} samples" if samples else "")
    replicates = int(frame[INTERVALS].min())
    text += f", {replicates} eval replicate{'s' if replicates != 1 else ''}"
    counts = _adapter_counts(frame)
    if counts is not None:
        seeds, data = counts
        high = int(seeds.max())
        text += (f", {_count(data)} data seeds × " if data.max() > 1 else ", ") + (
            f"{_count(seeds)} training seed{'s' if high != 1 else ''} per "
            + ("data seed of each adapter row" if data.max() > 1 else "adapter"))
    if eval_set and EVAL_SET in frame.columns and not frame.is_empty():
        text += f"; eval set {frame[EVAL_SET][0]}"
    return text


def _value(row: Mapping[str, Any], column: str, signed: bool) -> str:
    spec = "+.2f" if signed else ".2f"
    return with_interval(f"{row[column]:{spec}}", row.get(f"{column} low"),
                         row.get(f"{column} high"), signed)


NAMED_CHARS = 180
"""Characters the rows named below and above the base model may take in a summary, both sides
together: with the summary's other lines it stays on the page's first screen (``summary``); a
longer list pushes the rest of the summary below it."""


def named_rows(frame: pl.DataFrame, metric: str = "pass@1") -> str:
    """Which rows lie below and which above the base model on ``metric`` (their 95% paired
    interval on Δ excludes 0), by name, the largest |Δ| first: ``Below the base model: hard ·
    dpo · random, ...; above: none.`` The two lists share ``NAMED_CHARS`` (a side needing less
    than half leaves the rest to the other); a list cut short ends with how many more there
    are.

    Why names and not only counts: "3 rows below" sends the reader hunting through the table
    for the three."""
    runs = frame.slice(1)
    delta = f"Δ {metric}"
    names = {}
    for side, hits in (("below", [hi is not None and hi < 0 for hi in runs[f"{delta} high"]]),
                       ("above", [lo is not None and lo > 0 for lo in runs[f"{delta} low"]])):
        picked = sorted((r for r, hit in zip(runs.iter_rows(named=True), hits, strict=True)
                         if hit), key=lambda r: -abs(r[delta]))
        names[side] = [row_label(r) for r in picked]
    needs = {side: sum(len(n) + 2 for n in found) for side, found in names.items()}
    texts = {}
    for side, other in (("below", "above"), ("above", "below")):
        budget = max(NAMED_CHARS // 2, NAMED_CHARS - needs[other])
        shown: list[str] = []
        for name in names[side]:
            if sum(len(n) + 2 for n in shown) + len(name) > budget:
                break
            shown.append(name)
        texts[side] = ", ".join(shown) if shown else "none"
        if len(shown) < len(names[side]):
            texts[side] += f" and {len(names[side]) - len(shown)} more (marked * in the table)"
    return f"Below the base model: {texts['below']}; above: {texts['above']}."


def count_rule(frame: pl.DataFrame) -> str:
    """What ``summary``'s counts mean, for the line under the table (``about the table``):
    kept out of the summary so that the summary ends on the page's first screen."""
    return (f"A row counts as below or above the base model when its 95% paired interval on "
            f"Δ excludes 0; Holm's correction is over the table's {rows_text(frame.height - 1)}.")


def summary(frame: pl.DataFrame, samples: int | None = None) -> str:
    """The table's answer in three Markdown paragraphs, for the top of its page: per metric,
    how many rows lie below and above the base model (their 95% paired interval on Δ excludes
    0; and after Holm's correction; ``count_rule`` says so under the table); which rows those
    are on pass@1 (``named_rows``); the best row by Δ pass@1 with its interval, and the sample.
    How the eval set was made is the page's ``eval_set`` entry, and the best row and the sample
    share a paragraph, so that the summary ends on the page's first screen.

    Why counts of intervals and not of point estimates: a Δ of -0.3 whose interval spans 0 is
    no evidence of harm; the counts say what the table can support.
    """
    metrics = [c for c in frame.columns if c.startswith("pass@") and " " not in c]
    base = frame.row(0, named=True)
    rows = frame.height - 1
    if rows == 0 or f"Δ {metrics[0]} low" not in frame.columns:
        return (f"Only the base model: {metrics[0]} {_value(base, metrics[0], False)}%. "
                f"Sample: {sample_text(frame, samples)}.")
    counts = []
    for i, metric in enumerate(metrics):
        below, above, below_holm, above_holm = _directions(frame, metric)
        head = (f"{below} of {rows_text(rows)} below the base model, {above} above" if i == 0
                else f"{below} below, {above} above")
        counts.append((f"**{metric}: {head}**" if i == 0 else f"{metric}: {head}")
                      + f" ({below_holm} and {above_holm} after Holm)")
    runs = frame.slice(1)
    best = runs.row(int(runs[f"Δ {metrics[0]}"].arg_max() or 0), named=True)
    lines = [
        "; ".join(counts) + ".",
        named_rows(frame, metrics[0]),
        f"Best: **{row_label(best)}**, Δ {metrics[0]} {_value(best, f'Δ {metrics[0]}', True)}"
        f" points (base model {_value(base, metrics[0], False)}%). Sample: "
        f"{sample_text(frame, samples, eval_set=False)} (the eval set: `eval_set`).",
    ]
    return "\n\n".join(lines)


def selection_summary(table: pl.DataFrame) -> str:
    """A selection table's answer (``selection.selection_table``) in Markdown: the chosen
    configuration, its mean validation pass@1 over its seeds, and its margin over the next
    best (or the tie it won by being listed first).

    Why it says there is no interval: the table keeps one mean per configuration, so a margin
    cannot be told from noise here; the chosen adapter's eval report (Δ with its paired
    interval) is where it is judged."""
    rows = table.to_dicts()
    winner = next(r for r in rows if r["chosen"])
    value = winner["validation pass@1"]
    seeds = winner["seeds"]
    head = (f"**Chosen: {winner['configuration']}**, validation pass@1 {value:.2f}% (mean of "
            f"{seeds} training seed{'s' if seeds != 1 else ''})")
    others = sorted((r for r in rows if not r["chosen"]),
                    key=lambda r: -r["validation pass@1"])
    if not others:
        return head + ", the only configuration."
    runner = others[0]
    margin = value - runner["validation pass@1"]
    if round(margin, 9) == 0:
        head += (f", tied with {runner['configuration']}: a tie goes to the configuration "
                 "listed first")
    else:
        head += (f", {margin:.2f} points above the next, {runner['configuration']} "
                 f"({runner['validation pass@1']:.2f}%)")
    return (f"{head}; {len(rows)} configurations.\n\nNo interval: the table keeps one mean per "
            "configuration, on validation questions disjoint from the eval set; the chosen "
            "adapter's eval report gives its Δ with a paired interval.")


FOREST_WIDTH = 31
"""Characters of a text forest plot's axis (``text_forest``): narrow enough that the results
page's metadata table fits the UI's metadata panel with room to spare."""
_BLANK, _ZERO, _LINE, _POINT = "\u2007", "│", "─", "●"  # a figure space: HTML keeps it


def text_forest(frame: pl.DataFrame, metric: str = "pass@1",
                width: int = FOREST_WIDTH) -> tuple[str, list[tuple[str, str]]]:
    """Each row's Δ ``metric`` and its 95% paired interval drawn in characters on one axis,
    ``│`` at 0, ``●`` the estimate, ``─`` the interval: a forest plot that a UI table shows
    inline (Dagster shows a figure only behind a link), so the comparison with the base model
    is on a report's first screen. Returns the axis caption and ``(row, bar)`` per row, the
    base model left out (its Δ is 0 by construction)."""
    delta = f"Δ {metric}"
    runs = frame.filter(pl.col("split") != "-")
    if runs.is_empty() or f"{delta} low" not in runs.columns:
        return "", []
    lows, highs = runs[f"{delta} low"].to_list(), runs[f"{delta} high"].to_list()
    left, right = min(0.0, *lows), max(0.0, *highs)
    span = (right - left) or 1.0

    def at(x: float) -> int:
        return round((x - left) / span * (width - 1))

    bars = []
    for row, value, low, high in zip(runs.iter_rows(named=True), runs[delta].to_list(), lows,
                                     highs, strict=True):
        cells = [_BLANK] * width
        for i in range(at(low), at(high) + 1):
            cells[i] = _LINE
        cells[at(0.0)] = _ZERO
        cells[at(value)] = _POINT
        bars.append((row_label(row), "".join(cells)))
    caption = (f"{delta}, points: {left:+.2f} at the left edge, {right:+.2f} at the right; "
               f"{_ZERO} is 0 (the base model), {_POINT} the estimate, {_LINE} its 95% paired "
               "interval")
    return caption, bars
