"""Figures attached to assets (matplotlib, headless): each written as a PNG for the UI and,
for the result figures, an SVG beside it for print (``save_figure``).

The result figures show what the tables test: Δ to the base model with its 95% paired
interval (forest plots), values with their intervals (the λ sweep), and per-cell numbers with
a mark where the paired interval excludes 0 (the behaviour heatmap), so a figure never says
more than the intervals do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.layout_engine import ConstrainedLayoutEngine

from saturated_dag.data.partitions import GRID_INDEX
from saturated_dag.evaluation.statistics import LEVEL
from saturated_dag.infra.atomic import atomic_save_figure
from saturated_dag.reporting.result_tables import row_label


def pass_at_1_heatmap(grids: dict[str, pl.DataFrame], path: Path, title: str) -> Path:
    """Side-by-side pass@1 heatmaps (one per pool), like the paper's Table 6.

    Each grid is ``partitions.pass_at_1_grid``'s frame: terms down, digits across.
    """
    panels = {name: g for name, g in grids.items() if not g.is_empty()}
    if not panels:
        raise ValueError("no chain-sum grid points to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(_width(4.2 * len(panels)), 3.8),
                             squeeze=False)
    for ax, (name, grid) in zip(axes[0], panels.items(), strict=True):
        digits = [c for c in grid.columns if c != GRID_INDEX]
        values = grid.select(pl.col(digits).cast(pl.Float64)).to_numpy()  # null -> nan
        image = ax.imshow(values * 100, cmap="Blues", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(digits)), digits)
        ax.set_yticks(range(grid.height), [str(i) for i in grid[GRID_INDEX]])
        ax.set_xlabel("digits")
        ax.set_ylabel("terms")
        ax.set_title(name)
        for r, c in zip(*np.nonzero(~np.isnan(values)), strict=True):  # row by row
            value = values[r, c]
            ax.text(c, r, f"{100 * value:.0f}", ha="center", va="center",
                    color="white" if value > 0.6 else "black", fontsize=8)
        fig.colorbar(image, ax=ax, label="pass@1 (%)")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=110)  # never a half-written PNG
    plt.close(fig)
    return path


def training_curves(
    epochs: list[dict], margins: list[float], path: Path, title: str
) -> Path:
    """Validation pass@1 per epoch and, for DPO, the reward margin per step (Figs. 5, 7).

    Kept for its callers; ``adapter_curves`` draws the same from a whole ``result.json``,
    with the loss of every logged step and the kept epoch marked."""
    panels = 2 if margins else 1
    fig, axes = plt.subplots(1, panels, figsize=(_width(4.5 * panels), 3.2), squeeze=False)
    ax = axes[0][0]
    xs = [e["epoch"] for e in epochs if "val_pass@1" in e]
    ax.plot(xs, [100 * e["val_pass@1"] for e in epochs if "val_pass@1" in e], marker="o",
            label="validation pass@1")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation pass@1 (%)")
    ax.set_xticks(xs)
    ax.legend(fontsize=7, loc="best")
    if margins:
        ax = axes[0][1]
        ax.plot(range(1, len(margins) + 1), margins, label="reward margin")
        ax.axhline(0, color="grey", linewidth=0.8, label="0 (no preference)")
        ax.set_xlabel("logged step")
        ax.set_ylabel("reward margin r(y_w) - r(y_l)")
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=110)  # never a half-written PNG
    plt.close(fig)
    return path


DPI = 150
"""PNG resolution of the result figures: readable when the UI scales them down, printable."""

UI_WIDTH = 7.2
"""Inches a result figure may be wide: the UI's figure dialog is 80% of the window and shows a
PNG at its natural size, so at ``DPI`` a wider figure is cut off on the right; 7.2 inches fit
the dialog, with its padding, in the window width ``docs/ui-guide.md`` is laid out for."""


def _width(inches: float) -> float:
    return min(inches, UI_WIDTH)


BELOW, ABOVE, NEITHER = "#C0392B", "#2471A3", "#7F8C8D"
"""Marker colours: interval below 0, above 0, spanning 0 (with filled/hollow for print)."""


PAD = 0.1
"""Inches of margin around a saved figure's tight box (matplotlib's ``savefig.pad_inches``)."""


def saved_width(fig: Any) -> float:
    """Inches wide the PNG of ``fig`` is once saved with ``bbox_inches="tight"``: the box of
    everything drawn (a label or legend past the figure's edge widens it) plus ``PAD`` a side,
    which is why a ``UI_WIDTH`` figure whose layout reaches its edges saves wider."""
    fig.draw_without_rendering()  # lays the figure out (a constrained layout runs at a draw)
    return float(fig.get_tightbbox().width) + 2 * PAD


def _fit_width(fig: Any) -> int:
    """Narrow a constrained-layout figure until it saves at most ``UI_WIDTH`` wide (its layout
    re-flows at the new width); the dpi its PNG fits the UI at, ``DPI`` unless a figure of
    another layout is still wider (a safety net: its pixels are then scaled down to fit)."""
    for _ in range(4):
        excess = saved_width(fig) - UI_WIDTH
        constrained = isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
        if excess <= 0.005 or not constrained:
            break
        width, height = fig.get_size_inches()
        fig.set_size_inches(width - excess - 0.01, height)
    return min(DPI, int(DPI * UI_WIDTH / saved_width(fig)))


def save_figure(fig: Any, path: Path) -> tuple[Path, Path]:
    """Write ``fig`` as a ``DPI`` PNG at ``path`` and an SVG beside it, each atomically (never a
    half-written file), then close it. The PNG is for the UI (a data URI), the SVG for print;
    the PNG is at most ``UI_WIDTH`` x ``DPI`` pixels wide, its tight box included
    (``_fit_width``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dpi = _fit_width(fig)
    atomic_save_figure(fig, path, dpi=dpi, bbox_inches="tight", pad_inches=PAD)
    with plt.rc_context({"svg.fonttype": "none"}):  # text stays text: editable, searchable
        svg = atomic_save_figure(fig, path.with_suffix(".svg"), bbox_inches="tight",
                                 pad_inches=PAD)
    plt.close(fig)
    return path, svg


def direction(low: float | None, high: float | None) -> str:
    """A row's marker colour from its interval: ``BELOW``/``ABOVE`` when the interval lies
    below/above 0, ``NEITHER`` when it spans 0 or is missing."""
    if low is None or high is None:
        return NEITHER
    return BELOW if high < 0 else ABOVE if low > 0 else NEITHER


def _grouped(frame: pl.DataFrame) -> list[tuple[str, list[int]]]:
    """The rows after the base model grouped by split, in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, split in enumerate(frame["split"].to_list()[1:], start=1):
        groups.setdefault(str(split), []).append(i)
    return list(groups.items())


def _layout(groups: list[tuple[str, list[int]]], headed: bool
            ) -> tuple[list[float], list[tuple[float, str]]]:
    """Each row's y (top to bottom) and each group heading's y: a gap between groups."""
    ys: list[float] = []
    headings = []
    y = 0.0
    for name, rows in groups:
        if headed:
            headings.append((y, name))
            y += 1
        for _ in rows:
            ys.append(y)
            y += 1
        y += 0.4
    return ys, headings


def forest_plot(frame: pl.DataFrame, metrics: Sequence[str], path: Path, title: str,
                label: Callable[[Mapping[str, Any]], str] = row_label) -> tuple[Path, Path]:
    """One panel per metric: each row's Δ to the base model (the frame's first row) with its
    95% paired interval, grouped by split, the zero line the base model; a filled, coloured
    marker where the interval excludes 0 (red below, blue above), hollow grey where it spans
    0; ``†`` where the Δ also holds after Holm's correction over the rows.

    Why Δ and not the values: the paired interval cancels question difficulty, so a row can be
    clearly below the base model while its own interval overlaps the base model's value."""
    if frame.height < 2:
        raise ValueError("a forest plot needs rows besides the base model")
    groups = _grouped(frame)
    headed = len(groups) > 1
    ys, headings = _layout(groups, headed)
    order = [i for _, rows in groups for i in rows]
    records = frame.to_dicts()
    height = 1.3 + 0.3 * (len(ys) + len(headings))
    fig, axes = plt.subplots(1, len(metrics), figsize=(_width(3.4 * len(metrics) + 2.6), height),
                             sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        delta = f"Δ {metric}"
        holm = f"{delta} Holm p"
        for y, i in zip(ys, order, strict=True):
            row = records[i]
            low, high = row.get(f"{delta} low"), row.get(f"{delta} high")
            colour = direction(low, high)
            if low is not None and high is not None:
                ax.plot([low, high], [y, y], color=colour, linewidth=1.6,
                        solid_capstyle="butt")
            filled = colour != NEITHER
            ax.plot(row[delta], y, "o", markersize=5.5, color=colour,
                    markerfacecolor=colour if filled else "white", markeredgewidth=1.3)
            if filled and row.get(holm) is not None and row[holm] < 1 - LEVEL:
                ax.annotate("†", (high if colour == ABOVE else low, y), xytext=(
                    4 if colour == ABOVE else -9, -3), textcoords="offset points", fontsize=9,
                    color=colour)
        ax.axvline(0, color="black", linewidth=0.9, linestyle="--", zorder=0)
        ax.set_xlabel(f"{delta} (points),\n95% paired interval", fontsize=9)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.margins(x=0.12)
    ticks = ys + [y for y, _ in headings]
    # under a split's heading a row's label leaves the split out
    labels = [label({**records[i], "split": "-"} if headed else records[i]) for i in order]
    labels += [name for _, name in headings]
    axes[0][0].set_yticks(ticks, labels, fontsize=8)
    for tick in axes[0][0].get_yticklabels()[len(ys):]:  # the split headings
        tick.set_fontweight("bold")
    axes[0][0].set_ylim(max(ticks) + 0.8, -0.8)  # the first row at the top
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c,
                          markerfacecolor=f, label=t) for c, f, t in (
        (BELOW, BELOW, "below the base model (interval < 0)"),
        (ABOVE, ABOVE, "above the base model (interval > 0)"),
        (NEITHER, "white", "interval spans 0"))]
    handles.append(plt.Line2D([], [], color="black", linestyle="--", label="base model (Δ = 0)"))
    handles.append(plt.Line2D([], [], linestyle="", marker="$†$", color="black",
                              label="also after Holm's correction"))
    # three to a row: five to a row were wider than the figure, and the saved PNG (its tight
    # box) grew past the UI's dialog
    legend_inches = 0.42
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, min(0.4, legend_inches / height), 1, 1))
    return save_figure(fig, path)


def sweep_plot(frame: pl.DataFrame, setting: str, metrics: Sequence[str], path: Path,
               title: str, axis_label: str) -> tuple[Path, Path]:
    """Each metric against a numeric sweep setting (Figure 6's λ) on a log axis, every point
    with its 95% interval, the base model's value and interval as a dashed line and band; a
    filled marker where the row's paired Δ interval excludes 0 (hollow where it spans 0). A
    setting of 0 is drawn at the left edge, a third of the smallest positive value."""
    rows = frame.slice(1).sort(setting, maintain_order=True)
    values = rows[setting].to_list()
    positive = [v for v in values if v > 0]
    zero_at = min(positive) / 3 if positive else 1e-3
    xs = [v if v > 0 else zero_at for v in values]
    base = frame.row(0, named=True)
    fig, axes = plt.subplots(1, len(metrics), figsize=(_width(4.6 * len(metrics)), 3.6),
                             squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        ax.axhline(base[metric], color="gray", linestyle="--", linewidth=1,
                   label="base model (95% interval shaded)")
        if base.get(f"{metric} low") is not None:
            ax.axhspan(base[f"{metric} low"], base[f"{metric} high"], color="gray", alpha=0.15,
                       linewidth=0)
        ax.plot(xs, rows[metric].to_list(), color="#2C7BB6", linewidth=1, zorder=1)
        for x, row in zip(xs, rows.iter_rows(named=True), strict=True):
            low, high = row.get(f"{metric} low"), row.get(f"{metric} high")
            colour = direction(row.get(f"Δ {metric} low"), row.get(f"Δ {metric} high"))
            if low is not None and high is not None:
                ax.plot([x, x], [low, high], color="#2C7BB6", linewidth=1.4, zorder=1)
            ax.plot(x, row[metric], "o", color=colour, zorder=2,
                    markerfacecolor=colour if colour != NEITHER else "white")
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{v:g}" for v in values])
        ax.minorticks_off()
        ax.set_xlabel(axis_label)
        ax.set_ylabel(f"{metric} (%), 95% interval")
        ax.legend(loc="best", fontsize=7)
    fig.suptitle(title + "\nfilled: paired Δ to the base model excludes 0", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def _cell_text(value: float, low: float | None, high: float | None) -> str:
    """A heatmap cell: the signed value, ``*`` when its paired interval excludes 0."""
    mark = "*" if low is not None and high is not None and (low > 0 or high < 0) else ""
    return f"{value:+.1f}{mark}"


def behaviour_heatmaps(table: pl.DataFrame, path: Path, title: str) -> tuple[Path, Path]:
    """Two heatmaps over adapter × eval cell, each cell's number written in it: Δ pass@1
    (points) with ``*`` where its 95% paired interval over the cell's questions excludes 0,
    and Δ mean tokens (no interval: the table has none for length). The base model's rows
    are left out (their Δ is 0 by construction)."""
    runs = table.filter(pl.col("row") != table["row"][0])
    if runs.is_empty():
        raise ValueError("no adapter rows to draw")
    rows = runs["row"].unique(maintain_order=True).to_list()
    cells = sorted(runs["cell"].unique().to_list())
    lookup = {(r["row"], r["cell"]): r for r in runs.iter_rows(named=True)}
    fig, axes = plt.subplots(1, 2, figsize=(_width(5 + 1.5 * len(cells)),
                                            1.6 + 0.34 * len(rows)))
    for ax, measure, unit in ((axes[0], "Δ pass@1", "points; * 95% paired interval excludes 0"),
                              (axes[1], "Δ mean_tokens", "tokens; no interval")):
        matrix = np.array([[lookup[(r, c)][measure] for c in cells] for r in rows], dtype=float)
        limit = max(1.0, float(np.nanmax(np.abs(matrix))))  # no change: a scale of ±1
        shown = ax.imshow(matrix, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        for i, r in enumerate(rows):
            for j, c in enumerate(cells):
                found = lookup[(r, c)]
                text = (_cell_text(found[measure], found.get("Δ pass@1 low"),
                                   found.get("Δ pass@1 high")) if measure == "Δ pass@1"
                        else f"{found[measure]:+.1f}")
                dark = abs(matrix[i, j]) > 0.6 * limit
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
        ax.set_xticks(range(len(cells)), cells, fontsize=8, rotation=45)
        ax.set_yticks(range(len(rows)), rows if ax is axes[0] else [""] * len(rows),
                      fontsize=7)
        ax.set_title(f"{measure} ({unit})", fontsize=8)
        fig.colorbar(shown, ax=ax, fraction=0.05)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


STYLE_DIGITS = 7
"""Point size of the accuracies written in the style figure's squares: any smaller and they are
too small to read in the UI."""


STYLE_SQUARE = 0.27
"""Inches a square of the style figure is at least wide: room for its accuracy ("100") at
``STYLE_DIGITS`` points. Panels wrap to another row where a row of them would be narrower."""


def style_shift(styles: pl.DataFrame, path: Path, title: str) -> tuple[Path, Path]:
    """One panel per eval cell: each adapter's change in style share from the base model
    (points, colour), with the style's accuracy in that row written in the square.

    Within ``UI_WIDTH``: the adapters' names once per row of panels, one colour scale for all
    on the right, and as many panels to a row as leave each square ``STYLE_SQUARE`` wide (six
    cells of four styles: two rows of three), laid out by matplotlib's constrained layout so no
    label runs past the figure's edge."""
    rows = styles["row"].unique(maintain_order=True).to_list()
    cells = sorted(styles["cell"].unique().to_list())
    kinds = sorted(styles["style"].unique().to_list())
    label_inches = 0.06 * max(len(str(r)) for r in rows)  # 7-point names: ~0.06 in a letter
    room = UI_WIDTH - label_inches - 1.1  # the scale and its label, the margins
    per_row = max(1, min(len(cells), int(room // (STYLE_SQUARE * len(kinds) + 0.15))))
    lines = -(-len(cells) // per_row)
    per_row = -(-len(cells) // lines)  # balanced: 3 + 3, not 4 + 2
    fig, axes = plt.subplots(lines, per_row, squeeze=False, sharey=True, layout="constrained",
                             figsize=(UI_WIDTH - 2 * PAD,
                                      0.9 + lines * (0.8 + 0.21 * len(rows))))
    limit = max(1e-9, float(styles["Δ share"].abs().max() or 0.0))
    shown = None
    for ax, cell in zip(axes.flat, cells, strict=False):
        part = styles.filter(pl.col("cell") == cell)
        lookup = {(r["row"], r["style"]): r for r in part.iter_rows(named=True)}
        matrix = [[lookup[(r, k)]["Δ share"] if (r, k) in lookup else 0.0 for k in kinds]
                  for r in rows]
        shown = ax.imshow(matrix, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        for i, r in enumerate(rows):
            for j, k in enumerate(kinds):
                found = lookup.get((r, k))
                if found is not None and found["accuracy"] is not None and found["samples"]:
                    dark = abs(matrix[i][j]) > 0.6 * limit  # white on the deep colours
                    ax.text(j, i, f"{found['accuracy']:.0f}", ha="center", va="center",
                            fontsize=STYLE_DIGITS, color="white" if dark else "black")
        ax.set_xticks(range(len(kinds)), kinds, fontsize=7, rotation=60)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)  # shared: named in the first column
        ax.set_title(cell, fontsize=8)
    for ax in axes.flat[len(cells):]:
        ax.set_visible(False)
    fig.colorbar(shown, ax=axes, label="Δ share (points)", fraction=0.04, pad=0.02)
    fig.suptitle(f"{title}\nnumber: the style's accuracy (%) in that row; blank: the row has "
                 "no answer in that style", fontsize=9)
    return save_figure(fig, path)


def budget_plot(table: pl.DataFrame, path: Path, title: str) -> tuple[Path, Path]:
    """Expected best validation pass@1 against configurations tried (``budget.budget_table``),
    one panel per split (two to a row), one line per method and scorer with its 95% band, the
    same colour for a line in every panel and one legend for all, outside the axes: methods at
    equal tuning budget (Dodge et al. 2019)."""
    splits = table["split"].unique(maintain_order=True).to_list()
    labels = list(dict.fromkeys(f"{m} · {s}" for m, s in
                                table.select("method", "scorer").iter_rows()))
    colours = dict(zip(labels, plt.get_cmap("tab10" if len(labels) <= 10 else "tab20").colors,
                       strict=False))
    columns = min(2, len(splits))
    rows = -(-len(splits) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(_width(3.6 * columns + 0.4),
                                                     2.9 * rows + 0.6 + 0.18 * len(labels)),
                             squeeze=False, sharey=True, layout="constrained")
    handles = {}
    for ax, split in zip(axes.flat, splits, strict=False):
        part = table.filter(pl.col("split") == split)
        for (method, scorer), cell in part.group_by(["method", "scorer"], maintain_order=True):
            cell = cell.sort("configurations tried")
            x = cell["configurations tried"].to_numpy()
            name = f"{method} · {scorer}"
            line, = ax.plot(x, cell["expected best validation pass@1"].to_numpy(), "-o",
                            ms=3, color=colours.get(name), label=name)
            ax.fill_between(x, cell["low"].to_numpy(), cell["high"].to_numpy(),
                            color=line.get_color(), alpha=0.12)
            handles.setdefault(name, line)
        ax.set_title(split, fontsize=9)
        ax.set_xlabel("configurations tried (k)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in axes.flat[len(splits):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("expected best\nvalidation pass@1 (%)", fontsize=8)
    fig.legend(handles=list(handles.values()), loc="outside lower center", ncol=3, fontsize=7,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


LOSS_PARTS = {"rank_loss": "rank part", "sft_loss": "SFT part"}
"""σ-RRHF's parts of its loss, drawn beside the total where a logged step has them."""

MARGIN = "rewards/margins"
"""DPO's reward margin r(y_w) - r(y_l) in a logged step (the paper's Figs. 5, 7)."""

CHOSEN_COLOUR = "#000000"
"""The chosen configuration's line in a cell's overlay: black over the others' palette."""


def _logged_steps(log_history: Sequence[Mapping[str, Any]], key: str
                  ) -> tuple[list[float], list[float]]:
    """(step, value) of every logged step that has ``key``; the trainer's closing summary
    (``train_loss``, ``train_runtime``, no ``loss``) is not a step and is left out."""
    steps, values = [], []
    for entry in log_history:
        if key in entry and entry[key] is not None and "step" in entry:
            steps.append(float(entry["step"]))
            values.append(float(entry[key]))
    return steps, values


def _validation(epochs: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[float]]:
    """(epoch, validation pass@1 in %) of every epoch that was validated."""
    kept = [e for e in epochs if e.get("val_pass@1") is not None]
    return [int(e["epoch"]) for e in kept], [100 * float(e["val_pass@1"]) for e in kept]


def adapter_curves(epochs: Sequence[Mapping[str, Any]],
                   log_history: Sequence[Mapping[str, Any]], path: Path, title: str,
                   kept_epoch: int | None = None) -> tuple[Path, Path]:
    """One adapter's training as TensorBoard or W&B would show it, from its ``result.json``
    (``epochs``, ``log_history``): the training loss per logged step (σ-RRHF's rank and SFT
    parts beside it, epoch ends as dotted lines), validation pass@1 per epoch with
    ``kept_epoch`` marked, and for DPO the reward margin per logged step (Figs. 5, 7).

    Why a figure of every step: the metadata's ``training log`` is thinned to fit the page,
    and a diverging or flat loss shows only in the whole curve."""
    margins = _logged_steps(log_history, MARGIN)
    panels = 3 if margins[0] else 2
    fig, axes = plt.subplots(1, panels, figsize=(_width(3.6 * panels + 0.6), 3.4),
                             squeeze=False)
    loss_ax, val_ax = axes[0][0], axes[0][1]
    steps, loss = _logged_steps(log_history, "loss")
    loss_ax.plot(steps, loss, "-", marker="." if len(steps) <= 60 else None, color="#2471A3",
                 label="loss")
    for key, name in LOSS_PARTS.items():
        part_steps, part = _logged_steps(log_history, key)
        if part_steps:
            loss_ax.plot(part_steps, part, "-", linewidth=1, alpha=0.8, label=name)
    for epoch in epochs:
        if "step" in epoch:
            loss_ax.axvline(float(epoch["step"]), color="grey", linestyle=":", linewidth=0.8)
    loss_ax.plot([], [], color="grey", linestyle=":", linewidth=0.8, label="end of an epoch")
    loss_ax.set_xlabel("optimizer step")
    loss_ax.set_ylabel("training loss")
    loss_ax.set_title("loss per logged step", fontsize=9)
    loss_ax.legend(fontsize=7, loc="best")
    xs, ys = _validation(epochs)
    val_ax.plot(xs, ys, "-o", color="#2471A3", ms=5, label="validation pass@1")
    if kept_epoch is not None and kept_epoch in xs:
        val_ax.plot(kept_epoch, ys[xs.index(kept_epoch)], "*", ms=14, color="#C0392B",
                    label=f"kept epoch ({kept_epoch})", zorder=3)
    val_ax.set_xticks(xs)
    val_ax.set_xlabel("epoch")
    val_ax.set_ylabel("validation pass@1 (%)")
    val_ax.set_title("validation pass@1 per epoch", fontsize=9)
    val_ax.legend(fontsize=7, loc="best")
    if margins[0]:
        margin_ax = axes[0][2]
        margin_ax.plot(*margins, "-", color="#7D3C98", label="reward margin")
        margin_ax.axhline(0, color="grey", linewidth=0.8, label="0 (no preference)")
        margin_ax.set_xlabel("optimizer step")
        margin_ax.set_ylabel("r(y_w) - r(y_l)")
        margin_ax.set_title("DPO reward margin", fontsize=9)
        margin_ax.legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def cell_overlay(runs: Mapping[str, Mapping[str, Any]], chosen: Collection[str], path: Path,
                 title: str) -> tuple[Path, Path]:
    """All of one cell's trainings in one figure: the training loss per logged step and
    validation pass@1 per epoch, a line per run. ``runs`` maps a run's label (its partition key,
    e.g. ``lr0.0003_seed0``) to its ``result.json`` (``epochs``, ``log_history``); the labels
    in ``chosen`` (every seed of the selected configuration) are drawn black and thick, with
    their kept epoch (``best_epoch``) starred, the others thin in colour.

    Why one figure: the selection's table says which configuration won on validation; the
    overlay shows whether it won by a curve that is still rising, a lucky epoch or a clear
    margin, which is what a researcher checks before trusting the choice."""
    if not runs:
        raise ValueError("no runs to draw")
    fig, (loss_ax, val_ax) = plt.subplots(1, 2, figsize=(_width(9.4), 3.8))
    palette = plt.get_cmap("tab20")
    many = len(runs) > 10  # a legend row per run would hide the curves: the chosen only
    for index, (label, result) in enumerate(sorted(runs.items(), key=lambda kv: kv[0]
                                                   in chosen)):
        picked = label in chosen
        style: dict[str, Any] = ({"color": CHOSEN_COLOUR, "linewidth": 2.2, "zorder": 3}
                                 if picked else {"color": palette(index % 20),
                                                 "linewidth": 1, "alpha": 0.7, "zorder": 2})
        name = f"{label} (chosen)" if picked else label
        shown = name if picked or not many else None
        loss_ax.plot(*_logged_steps(result.get("log_history", []), "loss"), "-",
                     label=shown, **style)
        xs, ys = _validation(result.get("epochs", []))
        val_ax.plot(xs, ys, "-o", ms=3.5 if not picked else 5, label=shown, **style)
        kept = result.get("best_epoch")
        if picked and kept in xs:
            val_ax.plot(kept, ys[xs.index(kept)], "*", ms=15, color="#C0392B", zorder=4)
    if many:
        others = len(runs) - len(set(chosen) & set(runs))
        loss_ax.plot([], [], color=palette(0), linewidth=1, label=f"{others} other runs")
    val_ax.plot([], [], "*", ms=11, color="#C0392B", linestyle="", label="kept epoch (chosen)")
    loss_ax.set_xlabel("optimizer step")
    loss_ax.set_ylabel("training loss")
    loss_ax.set_title("loss per logged step", fontsize=9)
    val_ax.set_xlabel("epoch")
    val_ax.set_ylabel("validation pass@1 (%)")
    val_ax.set_title("validation pass@1 per epoch", fontsize=9)
    val_ax.xaxis.get_major_locator().set_params(integer=True)
    loss_ax.legend(fontsize=6.5, loc="best")
    val_ax.legend(fontsize=6.5, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
