"""Per-cell behaviour and style mix of eval reports (saturated_dag.analysis.behaviour)."""

from __future__ import annotations

import polars as pl
import pytest

from saturated_dag.analysis.behaviour import BASE, behaviour_table, style_table
from saturated_dag.schemas import schema
from saturated_dag.tasks.solution_styles import detect_style

STEP = "**Addition:** 2 + 3 = 5\n\\boxed{5}"
BARE = "\\boxed{5}"


def _samples(cells: dict[str, list[tuple[str, bool, int]]]) -> pl.DataFrame:
    """An eval report from (completion, correct, tokens) per sample, grouped by cell."""
    rows = [{"question_id": f"{cell}-q{i // 4}", "cell": cell, "replicate": 0,
             "sample_index": i % 4,
             "gold": "5", "completion": text, "answer": "5" if ok else None, "correct": ok,
             "num_tokens": tokens, "finish_reason": "stop" if tokens < 50 else "length",
             "mean_entropy": 0.1 * tokens}
            for cell, samples in cells.items() for i, (text, ok, tokens) in enumerate(samples)]
    return pl.DataFrame(rows, schema=schema("eval_report"))


BASE_REPORT = _samples({"5x1": [(STEP, True, 20), (STEP, True, 20), (BARE, False, 4),
                                (BARE, False, 4)],
                        "5x2": [(STEP, False, 30), (BARE, False, 60), (BARE, False, 4),
                                (BARE, False, 4)]})
# trained toward the step-by-step style: every one-digit sample right, two-digit unchanged
RUN_REPORT = _samples({"5x1": [(STEP, True, 20)] * 4,
                       "5x2": [(STEP, False, 30)] * 2 + [(BARE, False, 4)] * 2})


def test_behaviour_table_measures_each_cell_and_its_change() -> None:
    table = behaviour_table(BASE_REPORT, {"saturated/sft": RUN_REPORT})
    assert table.columns == list(schema("behaviour"))
    base = table.filter(pl.col("row") == BASE).rows_by_key("cell", named=True, unique=True)
    run = table.filter(pl.col("row") == "saturated/sft").rows_by_key("cell", named=True,
                                                                      unique=True)
    assert base["5x1"]["pass@1"] == 50.0 and run["5x1"]["pass@1"] == 100.0
    assert run["5x1"]["Δ pass@1"] == 50.0 and run["5x2"]["Δ pass@1"] == 0.0
    assert base["5x1"]["mean_tokens"] == 12.0 and run["5x1"]["Δ mean_tokens"] == 8.0
    assert base["5x1"]["answer_rate"] == 50.0 and base["5x2"]["truncated_rate"] == 25.0
    assert run["5x2"]["mean_entropy"] == pytest.approx(1.7)
    assert (table.filter(pl.col("row") == BASE)["Δ pass@1"] == 0).all()
    # Δ pass@1's interval, paired over the cell's questions (here one, so no spread)
    assert (run["5x1"]["Δ pass@1 low"], run["5x1"]["Δ pass@1 high"]) == (50.0, 50.0)
    assert base["5x1"]["Δ pass@1 low"] == base["5x1"]["Δ pass@1 high"] == 0.0


def test_style_table_shows_the_shift_between_styles_and_each_styles_accuracy() -> None:
    table = style_table(BASE_REPORT, {"saturated/sft": RUN_REPORT}, detect_style)
    assert table.columns == list(schema("styles"))
    rows = {(r["row"], r["cell"], r["style"]): r for r in table.iter_rows(named=True)}
    assert rows[(BASE, "5x1", "steps")]["share"] == 50.0
    assert rows[(BASE, "5x1", "steps")]["accuracy"] == 100.0
    assert rows[(BASE, "5x1", "bare")]["accuracy"] == 0.0
    shifted = rows[("saturated/sft", "5x1", "bare")]
    assert shifted["share"] == 0.0 and shifted["samples"] == 0 and shifted["accuracy"] is None
    assert shifted["Δ share"] == -50.0 and rows[("saturated/sft", "5x1", "steps")]["Δ share"] == 50
    assert table["row"].unique(maintain_order=True).to_list() == [BASE, "saturated/sft"]


def test_the_style_shift_figure_draws_every_cell(tmp_path) -> None:
    from saturated_dag.reporting.plots import style_shift

    table = style_table(BASE_REPORT, {"saturated/sft": RUN_REPORT}, detect_style)
    png, svg = style_shift(table, tmp_path / "styles.png", "style shift")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert all(f">{cell}<" in svg.read_text() for cell in ("5x1", "5x2"))


def test_summary_counts_cells_by_their_paired_interval_and_names_the_extremes() -> None:
    from saturated_dag.analysis.behaviour import summary

    def mixed(i: int) -> bool:  # on d: question 0 loses two samples, question 1 gains one
        return False if i // 4 == 0 else i % 4 < 3 if i // 4 == 1 else i % 2 == 0

    base = _samples({"c": [(STEP, i % 4 == 0, 10) for i in range(40)],  # 10 questions each
                     "d": [(STEP, i % 2 == 0, 10) for i in range(40)]})
    run = _samples({"c": [(STEP, True, 12) for _ in range(40)],  # a clear gain on c
                    "d": [(STEP, mixed(i), 10) for i in range(40)]})
    table = behaviour_table(base, {"saturated/sft": run})
    text = summary(table)
    assert text.startswith("**Δ pass@1: 0 of 2 adapter × cell pairs below the base model, 1 "
                           "above** (1 adapter × 2 cells;"), text
    assert "not corrected for the 2 tests, so about 0.1 may by chance" in text
    gain = table.filter((pl.col("row") == "saturated/sft") & (pl.col("cell") == "c")).row(
        0, named=True)
    assert (f"largest gain saturated/sft on c, {gain['Δ pass@1']:+.2f} "
            f"[{gain['Δ pass@1 low']:+.2f}, {gain['Δ pass@1 high']:+.2f}]") in text
    assert "largest drop saturated/sft on d" in text  # a drop whose interval spans 0
    assert "Δ mean tokens from +0.00 to +2.00 (no interval)" in text
    assert "Sample: 40 samples per cell." in text
    assert summary(table.filter(pl.col("row") == BASE)).startswith("Only the base model")


def test_reports_over_other_cells_or_without_samples_are_errors() -> None:
    other = BASE_REPORT.with_columns(cell=pl.lit("9x9"))
    with pytest.raises(ValueError, match="covers other cells than the base model's"):
        behaviour_table(BASE_REPORT, {"x": other})
    with pytest.raises(ValueError, match="without samples"):
        behaviour_table(BASE_REPORT.clear(), {})


def test_cell_intervals_are_the_paired_bootstrap_over_the_cells_questions() -> None:
    from saturated_dag.evaluation.statistics import paired_delta

    base = _samples({"c": [(STEP, i % 3 == 0, 10) for i in range(40)]})  # 10 questions
    run = _samples({"c": [(STEP, i % 2 == 0, 10) for i in range(40)]})
    row = behaviour_table(base, {"r": run}).row(1, named=True)
    p_base = base.group_by("question_id").agg(pl.col("correct").mean()).sort("question_id")
    p_run = run.group_by("question_id").agg(pl.col("correct").mean()).sort("question_id")
    direct = paired_delta(p_run["correct"].to_numpy(), p_base["correct"].to_numpy()).scaled(100)
    assert (row["Δ pass@1"], row["Δ pass@1 low"], row["Δ pass@1 high"]) == pytest.approx(
        (direct.estimate, direct.low, direct.high))
    assert row["Δ pass@1 low"] < row["Δ pass@1"] < row["Δ pass@1 high"]
