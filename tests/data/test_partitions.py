"""Difficulty partitions and the pass@1 grid (saturated_dag.data.partitions, plots' heatmap)."""

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from saturated_dag.data import partitions
from saturated_dag.reporting import plots


def _pool(cells: dict[str, tuple[str, int, int, list[bool]]]) -> pl.DataFrame:
    """One row per completion of each question: (pool, terms, digits, correct flags)."""
    rows = [{"question_id": qid, "task": "chain_sum", "pool": pool, "cell": f"{t}x{d}",
             "terms": t, "digits": d, "sample_index": i, "correct": ok}
            for qid, (pool, t, d, flags) in cells.items() for i, ok in enumerate(flags)]
    return pl.DataFrame(rows)


POOL = _pool({
    "q3": ("D", 3, 10, [True] * 4),
    "q1": ("D", 3, 9, [True, False, False, False]),
    "q2": ("D", 10, 9, [True, True, False, False]),
    "q4": ("D", 3, 9, [True, True, True, True]),
    "p1": ("D_prime", 2, 1, [True] * 4),
    "p2": ("D_prime", 2, 2, [True, True, True, False]),
})


def test_partition_keeps_pool_order_counts_and_splits() -> None:
    table = partitions.partition(POOL)
    expected = pl.DataFrame({
        "question_id": ["q3", "q1", "q2", "q4", "p1", "p2"],
        "task": ["chain_sum"] * 6, "pool": ["D"] * 4 + ["D_prime"] * 2,
        "cell": ["3x10", "3x9", "10x9", "3x9", "2x1", "2x2"],
        "terms": [3, 3, 10, 3, 2, 2], "digits": [10, 9, 9, 9, 1, 2],
        "n_samples": [4] * 6, "n_correct": [4, 1, 2, 4, 4, 3],
        "p_hat": [1.0, 0.25, 0.5, 1.0, 1.0, 0.75],
        "split": ["saturated", "hard", "middle", "saturated", "strict_saturated",
                  "strict_excluded"]})
    assert_frame_equal(table, expected)
    assert partitions.split_counts(table) == {"saturated": 2, "hard": 1, "middle": 1,
                                              "strict_saturated": 1, "strict_excluded": 1}


def test_pass_at_1_grid_orders_digits_as_numbers_and_leaves_missing_cells_null() -> None:
    grid = partitions.pass_at_1_grid(partitions.partition(POOL), "D")
    expected = pl.DataFrame({"terms": [3, 10], "9": [0.625, 0.5], "10": [1.0, None]})
    assert_frame_equal(grid, expected)
    markdown = partitions.grid_markdown(grid, "D")
    assert markdown == ("**D**\n\n| terms / digits | 9 | 10 |\n|---|---|---|\n"
                        "| 3 | 62 | 100 |\n| 10 | 50 |  |\n")


def test_no_grid_without_cells() -> None:
    table = partitions.partition(POOL)
    assert partitions.pass_at_1_grid(table, "elsewhere").is_empty()
    gsm8k = partitions.partition(POOL.with_columns(terms=pl.lit(None, pl.Int64),
                                                   digits=pl.lit(None, pl.Int64)))
    grid = partitions.pass_at_1_grid(gsm8k, "D")
    assert grid.is_empty()
    assert partitions.grid_markdown(grid, "D") == "**D**: no grid points\n"
    with pytest.raises(ValueError, match="generation pool is empty"):
        partitions.partition(POOL.clear())
    with pytest.raises(ValueError, match=r"lacks columns \['correct'\]"):
        partitions.partition(POOL.drop("correct"))


def test_heatmap_labels_every_present_cell_and_no_missing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell the pool lacks stays blank (pandas 3's stack() kept it and drew "nan")."""
    drawn: list[list[str]] = []

    def save(fig, path, **kwargs):
        drawn.extend([t.get_text() for t in ax.texts] for ax in fig.axes if ax.get_title())
        Path(path).write_bytes(b"png")

    monkeypatch.setattr(plots, "atomic_save_figure", save)
    table = partitions.partition(POOL)
    grids = {p: partitions.pass_at_1_grid(table, p) for p in ("D", "D_prime")}
    plots.pass_at_1_heatmap(grids, tmp_path / "h.png", "pass@1")
    assert drawn == [["62", "100", "50"], ["100", "75"]]
    with pytest.raises(ValueError, match="no chain-sum grid points"):
        plots.pass_at_1_heatmap({"D": pl.DataFrame()}, tmp_path / "h.png", "pass@1")
