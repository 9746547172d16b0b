"""Issue 47, item 3: each report page's first screen holds its answer.

What the browser test (``tests/project/test_web_ui.py -m slow``) checks in Chromium, checked here on
the metadata itself, fast and offline: an eval report opens with its numbers, each estimate on
one line with its interval; the results summary names the rows on either side of the base
model; the long tables show at most about 20 rows inline, with the whole table in a file.
"""

from __future__ import annotations

import re

import polars as pl

from assets.eval_reports import science_metadata
from saturated_dag.reporting.result_tables import SUMMARY_CHARS


def _report(correct: list[int], cells: tuple[str, ...] = ("3x1", "4x1")) -> pl.DataFrame:
    """Per-question results (``evaluation.per_question_results``'s columns), 8 samples each."""
    return pl.DataFrame({"question_id": [f"q{i}" for i in range(len(correct))],
                         "cell": [cells[i % len(cells)] for i in range(len(correct))],
                         "n": [8] * len(correct), "correct": correct})


BASE = _report([4, 0, 8, 2, 6, 1, 3, 5])
BETTER = _report([6, 2, 8, 4, 8, 3, 5, 7])

ESTIMATE = re.compile(r"^- (Δ )?pass@\d+ \*\*[+-]?\d+\.\d\d(%| points)\*\* "
                      r"\[[+-]?\d+\.\d\d, [+-]?\d+\.\d\d\]")


def test_an_eval_report_opens_with_its_numbers_one_line_each() -> None:
    out = science_metadata(BETTER, BASE, 8, "toy")
    assert next(iter(out)) == "summary"
    text = out["summary"].value
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert [line.split(" **")[0][2:] for line in lines] == [
        "pass@1", "pass@8", "Δ pass@1", "Δ pass@8"]
    assert all(ESTIMATE.match(line) for line in lines), lines
    assert (f"pass@1 **{out['pass@1']:.2f}%** [{out['pass@1 low']:.2f}, "
            f"{out['pass@1 high']:.2f}]") in text
    assert f"against the base model's {out['base pass@1']:.2f}%" in text
    assert "8 eval questions" in text and len(text) < SUMMARY_CHARS
    # the plain numbers Plots charts are still there, after the summary and the cells' table
    keys = list(out)
    assert keys.index("by cell") < keys.index("pass@1") < keys.index("pass@1 low")


def test_the_base_models_report_opens_with_its_own_numbers() -> None:
    text = science_metadata(BASE, None, 8, "toy")["summary"].value
    assert text.startswith("**The base model on the eval set**")
    assert "Δ" not in text and text.count("\n- ") == 2


def test_the_eval_report_keeps_its_columns_below_its_numbers() -> None:
    """A report's column schema is its last entry, not Dagster's "Columns" section, which drew
    17 rows above the numbers (``schema_metadata(report=True)``)."""
    from assets.eval_reports import EVAL_ASSET
    from resources.parquet_io import REPORT_KEY

    assert EVAL_ASSET["metadata"].get(REPORT_KEY) is True
    assert "dagster/column_schema" not in EVAL_ASSET["metadata"]


def _behaviour(adapters: int = 23, cells: int = 6) -> pl.DataFrame:
    """A behaviour table's rows (the columns ``largest_changes`` reads): the base model's
    first, one per cell, then each adapter × cell with a Δ that grows with its index."""
    from saturated_dag.analysis.behaviour import BASE as BASE_ROW

    rows = [{"row": BASE_ROW, "cell": f"c{c}", "Δ pass@1": 0.0} for c in range(cells)]
    rows += [{"row": f"saturated/a{a}", "cell": f"c{c}", "Δ pass@1": (-1) ** a * (a + c / 10)}
             for a in range(adapters) for c in range(cells)]
    return pl.DataFrame(rows)


def test_the_behaviour_page_shows_the_largest_changes_inline() -> None:
    """The demo's 138-row table made the page 32,334 pixels tall: at most 20 rows inline, the
    base model's first, then the largest |Δ pass@1|, in the table's order."""
    from assets.behaviour import INLINE_ROWS, inline_note, largest_changes
    from saturated_dag.analysis.behaviour import BASE as BASE_ROW

    table = _behaviour()
    inline = largest_changes(table)
    assert inline.height == INLINE_ROWS == 20
    assert inline["row"].head(6).to_list() == [BASE_ROW] * 6
    picked = inline.slice(6)
    smallest = picked["Δ pass@1"].abs().min()
    left_out = table.slice(6).join(picked, on=["row", "cell"], how="anti")
    assert left_out["Δ pass@1"].abs().max() <= smallest  # none left out is larger
    order = {(r, c): i for i, (r, c) in enumerate(table.select("row", "cell").iter_rows())}
    kept = [order[(r, c)] for r, c in inline.select("row", "cell").iter_rows()]
    assert kept == sorted(kept)
    assert largest_changes(_behaviour(adapters=2, cells=2)).height == 6  # small: every row
    assert inline_note(20, 138, "Table", "behaviour.csv") == (
        "Table: 20 of 138 rows inline; all of them in `behaviour.csv`.")
    assert inline_note(6, 6, "Table", "behaviour.csv") == "Table: all 6 rows inline."


def test_the_style_figure_writes_its_digits_readably(tmp_path) -> None:
    from saturated_dag.reporting.plots import STYLE_DIGITS, style_shift

    styles = pl.DataFrame({"row": ["base model", "base model", "saturated/sft", "saturated/sft"],
                           "cell": ["3x1"] * 4, "style": ["bare", "steps"] * 2,
                           "Δ share": [0.0, 0.0, -20.0, 20.0],
                           "accuracy": [90.0, 100.0, 50.0, 97.0],
                           "samples": [8, 8, 8, 8]})
    _, svg = style_shift(styles, tmp_path / "styles.png", "t")
    text = svg.read_text()
    assert STYLE_DIGITS >= 7 and "blank: the row has no answer in that style" in text
    assert "font-size: 7px" in text or "font-size:7px" in text.replace(" ", "")
