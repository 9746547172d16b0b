"""Result and sweep tables (saturated_dag.reporting.result_tables) on polars eval reports."""

import polars as pl
import pytest

from saturated_dag.evaluation.metrics import pass_at_k
from saturated_dag.evaluation.statistics import bootstrap_mean, paired_delta
from saturated_dag.reporting.result_tables import (
    EVAL_SET,
    NAMED_CHARS,
    SUMMARY_CHARS,
    display_rows,
    eval_set_caption,
    named_rows,
    results_table,
    row_label,
    sample_text,
    selection_summary,
    summary,
    sweep_table,
    to_markdown,
)
from saturated_dag.schemas import schema, sweep_schema_name


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
# its 95% interval (docs/statistics.md), a Δ whose interval excludes 0 marked "*", each Δ's
# Holm-adjusted p over the table's rows beside it, and the base model's Δ "—" (issue 33: it is
# 0 by construction, not a measurement; it read "+0.00").
# a learning rate in scientific notation, as on every page (issue 47)
SWEEP_MARKDOWN = (
    '| split   | run            | beta   | lr   | epochs   | adapter   | pass@1  '
    '                  | pass@8                      | Δ pass@1               | H'
    'olm p (Δ pass@1)   | Δ pass@8                | Holm p (Δ pass@8)   |\n|:-----'
    '---|:---------------|:-------|:-----|:---------|:----------|:---------------'
    '-----------|:----------------------------|:-----------------------|:--------'
    '------------|:------------------------|:--------------------|\n| -       | Ba'
    'se model     |        |      |          |           | 50.00 [0.00, 100.00]  '
    '    | 66.67 [0.00, 100.00]        | —                      |                '
    '     | —                       |                     |\n| hard    | β=0.1, η='
    '1e-05 | 0.1    | 1e-5 | 2        | d1        | **70.83** [12.50, 100.00] | *'
    '*100.00** [100.00, 100.00] | +20.83 [+0.00, +50.00] | 0.200               | '
    '+33.33 [+0.00, +100.00] | 1.000               |\n| hard    | β=2, η=5e-06   |'
    ' 2.0    | 5e-6 |          | d2        | **70.83** [12.50, 100.00] | **100.00'
    '** [100.00, 100.00] | +20.83 [+0.00, +50.00] | 0.200               | +33.33 '
    '[+0.00, +100.00] | 1.000               |\n| hard    | β=5, η=5e-06   | 5.0   '
    ' | 5e-6 | 3        | d3        | 33.33 [0.00, 100.00]      | 33.33 [0.00, 10'
    '0.00]        | -16.67 [-50.00, +0.00] | 0.587               | -33.33 [-100.0'
    '0, +0.00] | 1.000               |')


RESULTS_MARKDOWN = (
    '| split     | method     | scorer     | pass@1                    | pass@8'
    '                      | Δ pass@1                | Holm p (Δ pass@1)   | Δ '
    'pass@8                | Holm p (Δ pass@8)   |\n|:----------|:-----------|:-'
    '----------|:--------------------------|:----------------------------|:----'
    '--------------------|:--------------------|:------------------------|:----'
    '----------------|\n| -         | Base model |            | 50.00 [0.00, 100'
    '.00]      | 66.67 [0.00, 100.00]        | —                       |       '
    '              | —                       |                     |\n| saturate'
    'd | SFT        |            | **70.83** [12.50, 100.00] | **100.00** [100.'
    '00, 100.00] | +20.83 [+0.00, +50.00]  | 0.200               | +33.33 [+0.0'
    '0, +100.00] | 1.000               |\n| saturated | DPO        | self_judge '
    '| **70.83** [12.50, 100.00] | **100.00** [100.00, 100.00] | +20.83 [+0.00,'
    ' +50.00]  | 0.200               | +33.33 [+0.00, +100.00] | 1.000         '
    '      |\n| hard      | σ-RRHF     | entropy    | **12.50** [12.50, 12.50]  '
    '| **100.00** [100.00, 100.00] | -37.50 [-87.50, +12.50] | 0.200           '
    '    | +33.33 [+0.00, +100.00] | 1.000               |')


def test_results_table_rows_columns_and_markdown_as_before() -> None:
    frame = results_table(BASE, {("saturated", "sft", None): _report([8, 1, 8]),
                                 ("saturated", "dpo", "self_judge"): _report([8, 1, 8]),
                                 ("hard", "rrhf", "entropy"): _report([1, 1, 1])},
                          eval_set="toy")
    assert frame.columns == list(schema("results_table", k=8))
    assert frame.schema["pass@1"] == pl.Float64 and frame.schema[EVAL_SET] == pl.String
    assert frame["scorer"].to_list() == ["", "", "self_judge", "entropy"]
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


def _questions(correct: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i:02d}" for i in range(len(correct))],
                         "n": [8] * len(correct), "correct": correct})


def test_summary_counts_rows_by_their_paired_interval_not_their_estimate() -> None:
    base = _questions([i % 5 for i in range(30)])
    worse = _questions([max(0, i % 5 - 3) for i in range(30)])  # clearly below
    change = {1: -1, 2: -1, 3: +1}  # a net loss whose interval spans 0
    slightly = _questions([i % 5 + change.get(i, 0) for i in range(30)])
    frame = results_table(base, {("saturated", "sft", None): worse,
                                 ("hard", "rrhf", "entropy"): slightly}, eval_set="toy")
    assert frame["Δ pass@1"][2] < 0 < frame["Δ pass@1 high"][2]
    text = summary(frame, samples=8)
    first = text.split("\n\n")[0]
    assert first.startswith("**pass@1: 1 of 2 rows below the base model, 0 above**"), first
    assert "pass@8: " in first and "after Holm" in first
    # the best row by Δ pass@1, with its paired interval as the table writes it
    best = frame.row(2, named=True)
    assert (f"Best: **hard · σ-RRHF · entropy**, Δ pass@1 {best['Δ pass@1']:+.2f} "
            f"[{best['Δ pass@1 low']:+.2f}, {best['Δ pass@1 high']:+.2f}] points") in text
    assert ("Sample: 30 eval questions × 8 samples, 1 eval replicate, 1 training seed per "
            "adapter (the eval set: `eval_set`).") in text  # the page's own entry
    assert "eval set toy" in sample_text(frame, 8)
    # issue 47: the rows below and above are named, not only counted
    assert "Below the base model: saturated · SFT; above: none." in text
    assert len(text) < SUMMARY_CHARS


def test_named_rows_stay_within_the_summary_budget() -> None:
    """Thirty rows below the base model: the first few by |Δ| are named, the rest counted, and
    the summary still reads without a click (under ``SUMMARY_CHARS``)."""
    base = _questions([i % 5 for i in range(30)])
    worse = {("strict_saturated", "rrhf", f"scorer_number_{i:02d}"):
             _questions([max(0, i % 5 - 3) for i in range(30)]) for i in range(30)}
    frame = results_table(base, worse, eval_set="toy")
    text = named_rows(frame)
    assert text.startswith("Below the base model: strict_saturated · σ-RRHF · scorer_number_")
    assert text.endswith("more (marked * in the table); above: none.")
    assert len(text) < NAMED_CHARS + 80  # the side with none leaves its half to the other
    label = "strict_saturated · σ-RRHF · scorer_number_00"
    assert text.count("scorer_number_") > (NAMED_CHARS // 2) // len(label)  # more than half
    assert len(summary(frame, samples=8)) < SUMMARY_CHARS
    assert "the table's 30 rows" in eval_set_caption(frame)


def test_summary_of_a_clear_gain_and_of_the_base_model_alone() -> None:
    base = _questions([i % 5 for i in range(30)])
    better = _questions([min(8, i % 5 + 3) for i in range(30)])
    text = summary(sweep_table(base, "hard", [("λ=0", {"lambda": 0.0}, better)]))
    assert text.startswith("**pass@1: 0 of 1 row below the base model, 1 above** (0 and 1 "
                           "after Holm)")
    assert "Best: **hard · λ=0**" in text and "× " not in text  # no samples given
    alone = summary(results_table(base, {}, k=8))
    assert alone.startswith("Only the base model: pass@1 ") and "Sample: 30 eval" in alone


def test_row_label_leaves_out_empty_parts() -> None:
    assert row_label({"split": "-", "method": "Base model", "scorer": ""}) == "Base model"
    assert row_label({"split": "hard", "method": "SFT", "scorer": ""}) == "hard · SFT"
    assert row_label({"split": "hard", "run": "β=2", "method": "x"}) == "hard · β=2"


def _selection(values: dict[str, list[float]]) -> pl.DataFrame:
    from saturated_dag.training.selection import Trained, selection_table

    return selection_table([Trained(name, {"learning_rate": 1e-5}, seeds, [1] * len(seeds))
                            for name, seeds in values.items()])


def test_selection_summary_names_the_choice_its_margin_and_that_it_has_no_interval() -> None:
    text = selection_summary(_selection({"a": [0.40, 0.50], "a_beta2": [0.60, 0.50],
                                         "a_lr5e-06": [0.1, 0.2]}))
    assert text.startswith("**Chosen: a_beta2**, validation pass@1 55.00% (mean of 2 training "
                           "seeds), 10.00 points above the next, a (45.00%); 3 configurations.")
    assert "No interval" in text
    tie = selection_summary(_selection({"a": [0.5], "b": [0.5]}))
    assert tie.startswith("**Chosen: a**, validation pass@1 50.00% (mean of 1 training seed), "
                          "tied with b: a tie goes to the configuration listed first")
    assert selection_summary(_selection({"a": [0.5]})).endswith("the only configuration.")


def test_text_forest_draws_each_interval_against_zero_on_one_axis() -> None:
    """The inline forest plot: one axis from the lowest interval end (or 0) to the highest,
    ``│`` at 0, ``●`` at the estimate, ``─`` over the interval; the base row left out."""
    from saturated_dag.reporting.result_tables import text_forest

    frame = pl.DataFrame({"split": ["-", "a", "b"], "method": ["Base model", "SFT", "DPO"],
                          "scorer": ["", "", "random"], "Δ pass@1": [0.0, -5.0, 2.5],
                          "Δ pass@1 low": [0.0, -10.0, 0.0], "Δ pass@1 high": [0.0, 0.0, 5.0]})
    caption, bars = text_forest(frame, width=7)  # axis -10 .. +5: 2.5 points a character
    assert [label for label, _ in bars] == ["a · SFT", "b · DPO · random"]
    blank = "\u2007"
    assert bars[0][1] == "──●─│" + blank * 2  # -10 .. 0, estimate -5
    assert bars[1][1] == blank * 4 + "│●─"    # 0 .. +5, estimate +2.5 (0 drawn under │)
    assert "-10.00 at the left edge, +5.00 at the right" in caption


def test_a_sweeps_learning_rate_is_written_as_on_every_page() -> None:
    """Issue 47: ``0.0001`` in the β × η sweep beside ``3e-4`` on the runs table."""
    base = _questions([i % 5 for i in range(30)])
    frame = sweep_table(base, "saturated", [("β=0.1", {"beta": 0.1, "lr": 1e-4}, base),
                                            ("β=2", {"beta": 2.0, "lr": 3e-4}, base)])
    headers, rows = display_rows(frame)
    column = headers.index("lr")
    assert [row[column] for row in rows] == ["", "1e-4", "3e-4"]
    assert [row[headers.index("beta")] for row in rows][1:] == [0.1, 2.0]
