"""Result and sweep tables (saturated_dag.result_tables) on polars eval reports."""

import polars as pl
import pytest

from saturated_dag.metrics import pass_at_k
from saturated_dag.result_tables import (
    EVAL_SET,
    eval_set_caption,
    results_table,
    sweep_table,
    to_markdown,
)
from saturated_dag.schemas import schema, sweep_schema_name
from saturated_dag.statistics import bootstrap_mean, paired_delta


def _report(correct: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": ["a", "b", "c"], "n": [8, 8, 8], "correct": correct})


BASE = _report([4, 0, 8])
BETA_ROWS = [
    ("β=0.1, η=1e-05", {"beta": 0.1, "lr": 1e-05, "epochs": 2, "adapter": "d1"},
     _report([8, 1, 8])),
    ("β=2, η=5e-06", {"beta": 2.0, "lr": 5e-06, "epochs": None, "adapter": "d2"},
     _report([8, 1, 8])),
    ("β=5, η=5e-06", {"beta": 5.0, "lr": 5e-06, "epochs": 3, "adapter": "d3"},
     _report([0, 0, 8])),
]
# The pandas version's Markdown (pandas.DataFrame.to_markdown), each value and Δ now followed by
# its 95% interval (docs/statistics.md), a Δ whose interval excludes 0 marked "*", and each Δ's
# Holm-adjusted p over the table's rows beside it.
SWEEP_MARKDOWN = (
    '| split   | run            | beta   | lr    | epochs   | adapter   | pass@1 '
    '                   | pass@8                      | Δ pass@1               | '
    'Holm p (Δ pass@1)   | Δ pass@8                | Holm p (Δ pass@8)   |\n|:----'
    '----|:---------------|:-------|:------|:---------|:----------|:-------------'
    '-------------|:----------------------------|:-----------------------|:------'
    '--------------|:------------------------|:--------------------|\n| -       | '
    'Base model     |        |       |          |           | 50.00 [0.00, 100.00'
    ']      | 66.67 [0.00, 100.00]        | +0.00                  |             '
    '        | +0.00                   |                     |\n| hard    | β=0.1,'
    ' η=1e-05 | 0.1    | 1e-05 | 2        | d1        | **70.83** [12.50, 100.00]'
    ' | **100.00** [100.00, 100.00] | +20.83 [+0.00, +50.00] | 0.200             '
    '  | +33.33 [+0.00, +100.00] | 1.000               |\n| hard    | β=2, η=5e-06'
    '   | 2.0    | 5e-06 |          | d2        | **70.83** [12.50, 100.00] | **1'
    '00.00** [100.00, 100.00] | +20.83 [+0.00, +50.00] | 0.200               | +3'
    '3.33 [+0.00, +100.00] | 1.000               |\n| hard    | β=5, η=5e-06   | 5'
    '.0    | 5e-06 | 3        | d3        | 33.33 [0.00, 100.00]      | 33.33 [0.'
    '00, 100.00]        | -16.67 [-50.00, +0.00] | 0.587               | -33.33 ['
    '-100.00, +0.00] | 1.000               |')
RESULTS_MARKDOWN = (
    '| split     | method     | scorer          | pass@1                    | pas'
    's@8                      | Δ pass@1                | Holm p (Δ pass@1)   | Δ'
    ' pass@8                | Holm p (Δ pass@8)   |\n|:----------|:-----------|:--'
    '--------------|:--------------------------|:----------------------------|:--'
    '----------------------|:--------------------|:------------------------|:----'
    '----------------|\n| -         | Base model |                 | 50.00 [0.00, '
    '100.00]      | 66.67 [0.00, 100.00]        | +0.00                   |      '
    '               | +0.00                   |                     |\n| saturated'
    ' | SFT        |                 | **70.83** [12.50, 100.00] | **100.00** [10'
    '0.00, 100.00] | +20.83 [+0.00, +50.00]  | 0.200               | +33.33 [+0.0'
    '0, +100.00] | 1.000               |\n| saturated | DPO        | self-judge   '
    '   | **70.83** [12.50, 100.00] | **100.00** [100.00, 100.00] | +20.83 [+0.00'
    ', +50.00]  | 0.200               | +33.33 [+0.00, +100.00] | 1.000          '
    '     |\n| hard      | σ-RRHF     | inverse entropy | **12.50** [12.50, 12.50]'
    '  | **100.00** [100.00, 100.00] | -37.50 [-87.50, +12.50] | 0.200           '
    '    | +33.33 [+0.00, +100.00] | 1.000               |')


def test_results_table_rows_columns_and_markdown_as_before() -> None:
    frame = results_table(BASE, {("saturated", "sft", None): _report([8, 1, 8]),
                                 ("saturated", "dpo", "self_judge"): _report([8, 1, 8]),
                                 ("hard", "rrhf", "entropy"): _report([1, 1, 1])},
                          eval_set="toy")
    assert frame.columns == list(schema("results_table", k=8))
    assert frame.schema["pass@1"] == pl.Float64 and frame.schema[EVAL_SET] == pl.String
    assert frame["scorer"].to_list() == ["", "", "self-judge", "inverse entropy"]
    assert to_markdown(frame) == RESULTS_MARKDOWN
    caption = eval_set_caption(frame)
    assert caption.startswith("Eval set: toy\nIn brackets: the 95% interval, a percentile "
                              "bootstrap over the 3 eval questions (each averaged over its 1 eval "
                              "replicate(s))")
    assert eval_set_caption(frame.drop(EVAL_SET, "replicates")) == ""


def test_a_report_on_other_questions_is_an_error() -> None:
    other = pl.DataFrame({"question_id": ["a", "b", "z"], "n": [8, 8, 8], "correct": [1, 1, 1]})
    with pytest.raises(ValueError, match="eval report of hard/sft/None covers different"):
        results_table(BASE, {("hard", "sft", None): other})


def test_sweep_table_columns_dtypes_and_markdown_as_before() -> None:
    frame = sweep_table(BASE, "hard", BETA_ROWS, eval_set="toy")
    assert frame.columns == list(schema(sweep_schema_name("dpo_beta"), k=8))
    # the best epoch stays an integer (null on the base row and where none was recorded)
    assert frame.schema["epochs"] == pl.Int64 and frame.schema["beta"] == pl.Float64
    assert frame["epochs"].to_list() == [None, 2, None, 3]
    assert to_markdown(frame) == SWEEP_MARKDOWN


def test_sweep_settings_take_declared_dtypes_and_refuse_mixed_values() -> None:
    rows = [(label, {**settings, "epochs": None}, report)
            for label, settings, report in BETA_ROWS]
    assert sweep_table(BASE, "hard", rows).schema["epochs"] == pl.Null
    declared = {"split": pl.String, "epochs": pl.Int64, "beta": pl.Float64, "adapter": pl.String}
    frame = sweep_table(BASE, "hard", rows, setting_dtypes=declared)
    assert frame.schema["epochs"] == pl.Int64 and frame["epochs"].null_count() == 4
    # integers in a float setting become floats, as the pandas version made them
    ints = [("λ=0", {"lambda": 0}, BASE), ("λ=0.5", {"lambda": 0.5}, BASE)]
    assert sweep_table(BASE, "hard", ints)["lambda"].to_list() == [None, 0.0, 0.5]
    mixed = [("x", {"w": 1}, BASE), ("y", {"w": "one"}, BASE)]
    with pytest.raises(ValueError, match="sweep setting values of mixed types"):
        sweep_table(BASE, "hard", mixed)
    with pytest.raises(ValueError, match="sweep column 'w' cannot hold"):
        sweep_table(BASE, "hard", mixed, setting_dtypes={"w": pl.Int64})


def test_single_k_has_one_metric_column_each() -> None:
    frame = results_table(BASE, {}, k=1)
    assert frame.columns == [c for c in schema("results_table", k=1) if c != EVAL_SET]
    assert "50.00" in to_markdown(frame)


def test_intervals_are_the_bootstrap_of_each_row_and_a_clear_gain_is_marked() -> None:
    questions = [f"q{i:02d}" for i in range(40)]
    base = pl.DataFrame({"question_id": questions, "n": [8] * 40,
                         "correct": [i % 3 for i in range(40)]})
    better = base.with_columns(correct=pl.col("correct") + 5)
    frame = results_table(base, {("saturated", "sft", None): better}, k=8)
    row = frame.row(1, named=True)
    p1 = [[c / 8 for c in better["correct"]]]
    p1_base = [[c / 8 for c in base["correct"]]]
    direct = bootstrap_mean(p1).scaled(100)
    delta = paired_delta(p1, p1_base).scaled(100)
    assert (row["pass@1"], row["pass@1 low"], row["pass@1 high"]) == pytest.approx(
        (direct.estimate, direct.low, direct.high))
    assert (row["Δ pass@1"], row["Δ pass@1 low"], row["Δ pass@1 high"]) == pytest.approx(
        (delta.estimate, delta.low, delta.high))
    p8 = [[pass_at_k(8, c, 8) for c in better["correct"]]]
    assert row["pass@8 low"] == pytest.approx(bootstrap_mean(p8).scaled(100).low)
    assert row["Δ pass@1 excludes 0"] and (row["questions"], row["replicates"]) == (40, 1)
    assert frame.row(0, named=True)["Δ pass@1 excludes 0"] is False
    assert "+62.50 [+62.50, +62.50]*" in to_markdown(frame)
