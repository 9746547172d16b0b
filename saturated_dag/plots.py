"""Figures attached to assets as PNG files (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from saturated_dag.atomic import atomic_save_figure
from saturated_dag.partitions import GRID_INDEX


def pass_at_1_heatmap(grids: dict[str, pl.DataFrame], path: Path, title: str) -> Path:
    """Side-by-side pass@1 heatmaps (one per pool), like the paper's Table 6.

    Each grid is ``partitions.pass_at_1_grid``'s frame: terms down, digits across.
    """
    panels = {name: g for name, g in grids.items() if not g.is_empty()}
    if not panels:
        raise ValueError("no chain-sum cells to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
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
    """Validation pass@1 per epoch and, for DPO, the reward margin per step (Figs. 5, 7)."""
    panels = 2 if margins else 1
    fig, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.2), squeeze=False)
    ax = axes[0][0]
    xs = [e["epoch"] for e in epochs if "val_pass@1" in e]
    ax.plot(xs, [100 * e["val_pass@1"] for e in epochs if "val_pass@1" in e], marker="o")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation pass@1 (%)")
    ax.set_xticks(xs)
    if margins:
        ax = axes[0][1]
        ax.plot(range(1, len(margins) + 1), margins)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("logged step")
        ax.set_ylabel("reward margin r(y_w) - r(y_l)")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=110)  # never a half-written PNG
    plt.close(fig)
    return path
