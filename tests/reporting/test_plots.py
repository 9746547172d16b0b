"""The result figures (saturated_dag.reporting.plots): what they draw is what the tables test.

Each figure is read back from its SVG (text kept as text) for the labels, numbers and marks it
writes, and from its PNG for the resolution the UI and print get.
"""

from __future__ import annotations

import struct
from pathlib import Path

import polars as pl
import pytest

from saturated_dag.analysis.behaviour import behaviour_table
from saturated_dag.reporting.plots import (
    ABOVE,
    BELOW,
    DPI,
    NEITHER,
    behaviour_heatmaps,
    direction,
    forest_plot,
    style_shift,
    sweep_plot,
)
from saturated_dag.reporting.result_tables import results_table, significant_after_holm, sweep_table
from tests.scoring_data import eval_report


def _counts(correct: list[int], n: int = 8) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i:02d}" for i in range(len(correct))],
                         "replicate": [0] * len(correct),
                         "training_replicate": [0] * len(correct),
                         "n": [n] * len(correct), "correct": correct})


BASE = _counts([i % 5 for i in range(30)])
CLEARLY_WORSE = _counts([max(0, i % 5 - 3) for i in range(30)])
CLEARLY_BETTER = _counts([min(8, i % 5 + 3) for i in range(30)])
SAME = BASE


def _table() -> pl.DataFrame:
    return results_table(BASE, {("saturated", "sft", None): CLEARLY_WORSE,
                                ("saturated", "dpo", "self_judge"): SAME,
                                ("hard", "rrhf", "entropy"): CLEARLY_BETTER}, k=8)


def _png_dpi(path: Path) -> float:
    """The PNG's resolution from its pHYs chunk (pixels per metre)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at = data.index(b"pHYs")
    per_metre, _, unit = struct.unpack(">IIB", data[at + 4:at + 13])
    assert unit == 1  # metres
    return per_metre * 0.0254


@pytest.mark.parametrize(("low", "high", "expected"), [
    (-3.0, -0.5, BELOW), (0.5, 3.0, ABOVE), (-1.0, 1.0, NEITHER), (0.0, 2.0, NEITHER),
    (None, None, NEITHER)])
def test_a_rows_colour_is_read_off_its_interval(low: float | None, high: float | None,
                                                expected: str) -> None:
    assert direction(low, high) == expected


def test_forest_plot_draws_every_row_grouped_by_split_with_print_and_ui_files(
        tmp_path: Path) -> None:
    frame = _table()
    png, svg = forest_plot(frame, ["pass@1", "pass@8"], tmp_path / "results.png", "title")
    assert png == tmp_path / "results.png" and svg == tmp_path / "results.svg"
    assert _png_dpi(png) == pytest.approx(DPI, abs=1) and DPI >= 150
    text = svg.read_text()
    # one line per row, labelled without its split under the split's heading
    for label in ("saturated", "hard", "SFT", "DPO · self_judge", "σ-RRHF · entropy"):
        assert f">{label}<" in text, label
    assert ">Base model<" not in text  # the base model is the zero line, not a row
    assert "Δ pass@1 (points)," in text and "95% paired interval" in text and "Δ pass@8" in text
    from PIL import Image

    # within the UI's figure dialog at a 1,440-pixel window (80%: 1,152 px), legend included
    assert Image.open(png).size[0] <= 1152 * 0.97, Image.open(png).size
    assert "base model (Δ = 0)" in text
    # a † per metric and row that holds after Holm's correction, and no more
    holds = sum(sum(significant_after_holm(frame.slice(1), f"Δ {m}"))
                for m in ("pass@1", "pass@8"))
    assert holds >= 2  # the clear loss and the clear gain on pass@1
    assert text.count(">†<") == holds  # (the legend draws its † as a marker, not text)


def test_forest_plot_marks_direction_by_interval_not_by_estimate(tmp_path: Path) -> None:
    frame = _table()
    rows = {r["method"]: r for r in frame.iter_rows(named=True)}
    assert direction(rows["SFT"]["Δ pass@1 low"], rows["SFT"]["Δ pass@1 high"]) == BELOW
    assert direction(rows["σ-RRHF"]["Δ pass@1 low"], rows["σ-RRHF"]["Δ pass@1 high"]) == ABOVE
    assert direction(rows["DPO"]["Δ pass@1 low"], rows["DPO"]["Δ pass@1 high"]) == NEITHER
    _, svg = forest_plot(frame, ["pass@1"], tmp_path / "f.png", "t")
    text = svg.read_text().lower()
    assert BELOW.lower() in text and ABOVE.lower() in text and NEITHER.lower() in text


def test_forest_plot_refuses_a_table_with_only_the_base_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rows besides the base model"):
        forest_plot(results_table(BASE, {}, k=8), ["pass@1"], tmp_path / "f.png", "t")


def test_sweep_plot_puts_lambda_zero_at_the_left_and_draws_intervals(tmp_path: Path) -> None:
    frame = sweep_table(BASE, "hard", [("λ=1", {"lambda": 1.0}, CLEARLY_BETTER),
                                        ("λ=0", {"lambda": 0.0}, SAME),
                                        ("λ=0.1", {"lambda": 0.1}, CLEARLY_WORSE)], k=8)
    png, svg = sweep_plot(frame, "lambda", ["pass@1", "pass@8"], tmp_path / "l.png", "λ",
                          "rank loss weight λ")
    assert _png_dpi(png) == pytest.approx(DPI, abs=1)
    text = svg.read_text()
    ticks = [t for t in ("0", "0.1", "1") if f">{t}<" in text]
    assert ticks == ["0", "0.1", "1"]
    assert "pass@1 (%), 95% interval" in text and "base model (95% interval shaded)" in text
    # the wide interval of every row is drawn: its ends lie outside the point's marker
    assert frame["pass@1 low"][1] < frame["pass@1"][1] < frame["pass@1 high"][1]


def test_behaviour_heatmap_writes_each_cells_number_and_marks_a_clear_change(
        tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(12)]
    base = eval_report({q: (4, 1) for q in ids}, cell="3x1")
    better = eval_report({q: (4, 4) for q in ids}, cell="3x1")  # +75 points on every question
    same = eval_report({q: (4, 1) for q in ids}, cell="3x1")
    table = behaviour_table(base, {"saturated/dpo": better, "hard/sft": same})
    png, svg = behaviour_heatmaps(table, tmp_path / "b.png", "behaviour")
    assert _png_dpi(png) == pytest.approx(DPI, abs=1)
    text = svg.read_text()
    assert ">+75.0*<" in text  # the clear gain, marked: its paired interval excludes 0
    assert ">+0.0<" in text  # no change, no mark
    assert ">saturated/dpo<" in text and ">hard/sft<" in text
    assert ">base model<" not in text  # its Δ is 0 by construction: not a row
    assert "no interval" in text  # the length panel says it has none


def test_the_style_shift_figure_has_its_print_version(tmp_path: Path) -> None:
    from saturated_dag.analysis.behaviour import style_table
    from saturated_dag.tasks.solution_styles import detect_style

    ids = [f"q{i}" for i in range(3)]
    base = eval_report({q: (4, 2) for q in ids}, cell="3x1")
    run = eval_report({q: (4, 4) for q in ids}, cell="3x1")
    png, svg = style_shift(style_table(base, {"r": run}, detect_style), tmp_path / "s.png", "s")
    assert _png_dpi(png) == pytest.approx(DPI, abs=1) and svg.stat().st_size > 1000


def _png_width(path: Path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def test_every_result_figure_fits_the_uis_figure_dialog(tmp_path: Path) -> None:
    """The UI shows a figure's PNG at its natural size in a dialog 80% of the window wide
    (1,536 px at 1920 px, less 40 px padding): wider, it is cut off on the right."""
    fits = 1536 - 40
    frame = _table()
    forest, _ = forest_plot(frame, ["pass@1", "pass@8"], tmp_path / "f.png", "t")
    sweep = sweep_table(BASE, "hard", [("λ=0", {"lambda": 0.0}, SAME),
                                       ("λ=1", {"lambda": 1.0}, CLEARLY_BETTER)], k=8)
    curve, _ = sweep_plot(sweep, "lambda", ["pass@1", "pass@8"], tmp_path / "l.png", "λ", "λ")
    ids = [f"q{i}" for i in range(3)]
    base = pl.concat([eval_report({q: (4, 1) for q in ids}, cell=f"{t}x{d}")
                      for t in range(2, 5) for d in (1, 2)])  # six cells
    heat, _ = behaviour_heatmaps(behaviour_table(base, {"r": base}), tmp_path / "b.png", "b")
    for png in (forest, curve, heat):
        assert _png_width(png) <= fits, (png.name, _png_width(png))


LONG = "hard/dpo_correctness_self_judge_beta2"
"""A long adapter name, like the demo's longest: labels of its length once widened figures."""


def _styles(cells: int, rows: int) -> pl.DataFrame:
    """A style table (``behaviour.style_table``'s columns) of ``cells`` eval cells, four styles
    and ``rows`` adapters with long names."""
    names = ["base model", *(f"{LONG}_{i}" for i in range(rows - 1))]
    records = [{"row": r, "cell": f"{2 + c // 2}x{1 + c % 2}", "style": s,
                "Δ share": float((i * 7 + j * 3) % 41 - 20), "accuracy": 100.0, "samples": 8}
               for i, r in enumerate(names) for c in range(cells)
               for j, s in enumerate(("bare", "hedged", "plan", "steps"))]
    return pl.DataFrame(records)


def _curves() -> dict:
    steps = [{"loss": 1.0 / s, "rewards/margins": 0.1 * s, "rank_loss": 0.5 / s,
              "sft_loss": 0.5 / s, "step": s, "epoch": s / 4} for s in range(1, 13)]
    return {"epochs": [{"epoch": e, "step": 4 * e, "val_pass@1": 0.3 + 0.05 * e}
                       for e in (1, 2, 3)], "log_history": steps, "best_epoch": 2}


def _draw(name: str, tmp_path: Path) -> Path:
    """Figure ``name`` drawn from small synthetic inputs shaped like the largest the demo and
    the study give it (many cells, long names); its PNG."""
    from saturated_dag.reporting import plots

    path = tmp_path / f"{name}.png"
    if name == "forest_plot":
        frame = results_table(BASE, {(split, method, scorer): CLEARLY_BETTER
                                     for split in ("saturated", "strict_saturated", "hard")
                                     for method in ("sft", "dpo", "rrhf")
                                     for scorer in ("self_judge", "strong_judge")}, k=8)
        return forest_plot(frame, ["pass@1", "pass@8"], path, "chain_sum: " + "Δ " * 30)[0]
    if name == "sweep_plot":
        frame = sweep_table(BASE, "hard", [(f"λ={v:g}", {"lambda": v}, CLEARLY_BETTER)
                                           for v in (0.0, 0.01, 0.1, 1.0, 10.0)], k=8)
        return sweep_plot(frame, "lambda", ["pass@1", "pass@8"], path, "λ", "λ")[0]
    if name == "behaviour_heatmaps":
        ids = [f"q{i}" for i in range(3)]
        base = pl.concat([eval_report({q: (4, 1) for q in ids}, cell=f"{t}x{d}")
                          for t in range(2, 5) for d in (1, 2)])  # six cells
        table = behaviour_table(base, {f"{LONG}_{i}": base for i in range(12)})
        return behaviour_heatmaps(table, path, "chain_sum: change from the base model")[0]
    if name == "style_shift":  # the demo's six cells; it was 1,217 px on the CI's four
        return style_shift(_styles(6, 14), path, "chain_sum: change in solution-style share "
                           "from the base model (number: the style's accuracy %)")[0]
    if name == "budget_plot":
        from saturated_dag.analysis import budget

        scores = {(split, method, scorer, f"{method}_{scorer}"): [40.0 + i, 45.0, 50.0 - i]
                  for i, split in enumerate(("saturated", "strict_saturated", "hard"))
                  for method in ("σ-RRHF", "DPO", "RAFT")
                  for scorer in ("entropy", "self_judge", "strong_judge")}
        return plots.budget_plot(budget.budget_table(scores, resamples=20), path, "budget")[0]
    if name == "adapter_curves":
        result = _curves()
        return plots.adapter_curves(result["epochs"], result["log_history"], path,
                                    f"chain_sum · {LONG}", kept_epoch=2)[0]
    if name == "cell_overlay":
        runs = {f"lr{lr}_seed{seed}": _curves() for lr in ("1e-05", "3e-05", "0.0003")
                for seed in (0, 1, 2)}
        return plots.cell_overlay(runs, {"lr3e-05_seed0", "lr3e-05_seed1"}, path, LONG)[0]
    if name == "training_curves":
        return plots.training_curves(_curves()["epochs"], [0.1, 0.2], path, LONG)
    if name == "pass_at_1_heatmap":
        grid = pl.DataFrame({"terms": [2, 3, 4, 5], **{str(d): [0.9, 0.7, 0.5, 0.3]
                                                        for d in (1, 2, 3)}})
        return plots.pass_at_1_heatmap({"D": grid, "D_prime": grid, "D_test": grid}, path,
                                       "pass@1")
    if name == "rho_figure":
        from saturated_dag.scorers import agreement

        per_question = pl.DataFrame(
            [{"question_id": f"q{q}", "split": split, "scorer_a": a, "scorer_b": b, "n": 4,
              "rho": (q % 5) / 5 - 0.4, "status": agreement.OK}
             for split in ("saturated", "hard") for a, b in (("entropy", "self_judge"),
                                                            ("self_judge", "strong_judge"))
             for q in range(6)], schema=agreement.PER_QUESTION_SCHEMA)
        return agreement.rho_figure(per_question, path, "within-question Spearman rho")
    if name == "dose_response_figure":
        from saturated_dag.analysis.testbed import dose_response_figure

        rows = pl.DataFrame([{"method": m, "scorer": f"{LONG}_{i}", "target ρ": t,
                              "ρ with oracle": 0.2 * i, "Δ pass@1": 1.0 * i, "Δ low": i - 2.0,
                              "Δ high": i + 2.0}
                             for m in ("σ-RRHF", "DPO", "SFT") for i in range(5)
                             for t in (0.2 * i, None)])
        return dose_response_figure(rows, path)
    if name == "search_figure":
        import numpy as np

        from saturated_dag.analysis import dpo_search
        from tests.analysis.test_dpo_search import PLANTED, _runs, _validation

        rng = np.random.default_rng(0)
        runs = [run for loss in ("sigmoid", "apo_zero") for beta in (0.1, 5.0)
                for nll in (0.0, 1.0) for eta in (1e-5, 1e-4, 3e-4)
                for run in _runs((loss, beta, nll, eta), 0.1, 0.0, rng, 1.0)]
        table = dpo_search.search_table(runs, _validation([0.5] * 40), None, [PLANTED], {},
                                        3.0)
        return dpo_search.search_figure(table, runs, [PLANTED], path)
    raise KeyError(name)


FIGURES = ("forest_plot", "sweep_plot", "behaviour_heatmaps", "style_shift", "budget_plot",
           "adapter_curves", "cell_overlay", "training_curves", "pass_at_1_heatmap",
           "rho_figure", "dose_response_figure", "search_figure")
"""Every function that draws a figure an asset shows in the UI (``assets._metadata.image``)."""


@pytest.mark.parametrize("name", FIGURES)
def test_each_figure_is_at_most_ui_width_wide_as_saved(tmp_path: Path, name: str) -> None:
    """Issue 66: the UI shows a figure's PNG at its natural size in a dialog at most 1,152 px
    wide at a 1,440-pixel window (1,112 px inside its padding) and cuts off or scrolls what is
    wider. Every figure's saved PNG, its tight box included, is at most ``UI_WIDTH`` inches at
    its dpi, and never more than ``UI_WIDTH`` x ``DPI`` pixels; the result figures are at
    ``DPI`` (``save_figure`` lowers the dpi only as a last resort)."""
    from saturated_dag.reporting.plots import UI_WIDTH

    png = _draw(name, tmp_path)
    width, dpi = _png_width(png), _png_dpi(png)
    assert width <= UI_WIDTH * dpi + 1, (name, width, dpi)
    assert width <= UI_WIDTH * DPI + 1, (name, width)
    if png.with_suffix(".svg").exists():  # a result figure (``save_figure``): at full dpi
        assert dpi == pytest.approx(DPI, abs=1), (name, dpi)
