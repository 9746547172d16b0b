"""Result and sweep tables (saturated_dag.result_tables) on polars eval reports."""

import polars as pl
import pytest

from saturated_dag.result_tables import (
    EVAL_SET,
    eval_set_caption,
    results_table,
    sweep_table,
    to_markdown,
)


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
# Written by the pandas version (pandas.DataFrame.to_markdown) for the same reports: the
# Markdown in README and on the asset pages must not change with the port.
SWEEP_MARKDOWN = (
    "| split   | run            | beta   | lr    | epochs   | adapter   | pass@1    | pass@8     "
    "| Δ pass@1   | Δ pass@8   |\n"
    "|:--------|:---------------|:-------|:------|:---------|:----------|:----------|:-----------"
    "|:-----------|:-----------|\n"
    "| -       | Base model     |        |       |          |           | 50.00     | 66.67      "
    "| +0.00      | +0.00      |\n"
    "| hard    | β=0.1, η=1e-05 | 0.1    | 1e-05 | 2        | d1        | **70.83** | **100.00** "
    "| +20.83     | +33.33     |\n"
    "| hard    | β=2, η=5e-06   | 2.0    | 5e-06 |          | d2        | **70.83** | **100.00** "
    "| +20.83     | +33.33     |\n"
    "| hard    | β=5, η=5e-06   | 5.0    | 5e-06 | 3        | d3        | 33.33     | 33.33      "
    "| -16.67     | -33.33     |")
RESULTS_MARKDOWN = (
    "| split     | method     | scorer          | pass@1    | pass@8     | Δ pass@1   "
    "| Δ pass@8   |\n"
    "|:----------|:-----------|:----------------|:----------|:-----------|:-----------"
    "|:-----------|\n"
    "| -         | Base model |                 | 50.00     | 66.67      | +0.00      "
    "| +0.00      |\n"
    "| saturated | SFT        |                 | **70.83** | **100.00** | +20.83     "
    "| +33.33     |\n"
    "| saturated | DPO        | self-judge      | **70.83** | **100.00** | +20.83     "
    "| +33.33     |\n"
    "| hard      | σ-RRHF     | inverse entropy | **12.50** | **100.00** | -37.50     "
    "| +33.33     |")


def test_results_table_rows_columns_and_markdown_as_before() -> None:
    frame = results_table(BASE, {("saturated", "sft", None): _report([8, 1, 8]),
                                 ("saturated", "dpo", "self_judge"): _report([8, 1, 8]),
                                 ("hard", "rrhf", "entropy"): _report([1, 1, 1])},
                          eval_set="toy")
    assert frame.columns == ["split", "method", "scorer", "pass@1", "pass@8", "Δ pass@1",
                             "Δ pass@8", EVAL_SET]
    assert frame.schema["pass@1"] == pl.Float64 and frame.schema[EVAL_SET] == pl.String
    assert frame["scorer"].to_list() == ["", "", "self-judge", "inverse entropy"]
    assert to_markdown(frame) == RESULTS_MARKDOWN
    assert eval_set_caption(frame) == "Eval set: toy"
    assert eval_set_caption(frame.drop(EVAL_SET)) == ""


def test_a_report_on_other_questions_is_an_error() -> None:
    other = pl.DataFrame({"question_id": ["a", "b", "z"], "n": [8, 8, 8], "correct": [1, 1, 1]})
    with pytest.raises(ValueError, match="eval report of hard/sft/None covers different"):
        results_table(BASE, {("hard", "sft", None): other})


def test_sweep_table_columns_dtypes_and_markdown_as_before() -> None:
    frame = sweep_table(BASE, "hard", BETA_ROWS, eval_set="toy")
    assert frame.columns == ["split", "run", "beta", "lr", "epochs", "adapter", "pass@1",
                             "pass@8", "Δ pass@1", "Δ pass@8", EVAL_SET]
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
    assert frame.columns == ["split", "method", "scorer", "pass@1", "Δ pass@1"]
    assert "50.00" in to_markdown(frame)
