"""Issue 47, item 3: each report page's first screen holds its answer.

What the browser test (``tests/test_web_ui.py -m slow``) checks in Chromium, checked here on
the metadata itself, fast and offline: an eval report opens with its numbers, each estimate on
one line with its interval; the results summary names the rows on either side of the base
model; the long tables show at most about 20 rows inline, with the whole table in a file.
"""

from __future__ import annotations

import re

import polars as pl

from assets.eval_reports import science_metadata
from saturated_dag.result_tables import SUMMARY_CHARS


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
