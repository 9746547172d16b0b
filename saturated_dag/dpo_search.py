"""The testbed's DPO recipe search: does DPO learn the planted signal at any recipe, and if
not, why (``docs/testbed.md``, ``TestbedSettings.dpo_search``)?

Every recipe (NLL weight, β, η) trains DPO with the oracle's pairs and with its shuffled
control on the testbed's first data and training seed, keeps its best epoch on validation,
and is evaluated on the testbed's eval set. Per recipe this module reads:

- Δ pass@1 to the base model of the oracle run and of the shuffled run, each with its paired
  95% interval over the eval questions (one replicate: questions resampled); the shuffled run
  exists only where the oracle's estimate reached the threshold (``testbed._search_runs``);
- whether the recipe passes DPO's controls: the oracle at least ``dpo_min_effect`` points with
  its interval above 0, the shuffled run's interval containing 0 within ±``null_band``;
- the oracle run's training log: the last reward margin and how far the chosen and the
  rejected completions' log-probabilities moved from the first logged step (the paper tracks
  margins; a margin that grows while both log-probabilities fall separates the pair without
  making the chosen completion likelier);
- the style shift: the total-variation distance (points) between the base model's and the
  oracle run's solution styles on the eval set.

The recipe the profile's rule picks on validation (``selection.choose``) is reported beside the
recipes that pass; a diagnosis sentence says what the margins and log-probabilities show when
none passes. Pure functions over frames, so a test can run them on synthetic runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from saturated_dag.statistics import Interval, paired_delta, per_question_pass_rate


@dataclass(frozen=True)
class SearchRun:
    """One recipe's two runs: the oracle's and the shuffled control's eval samples, the oracle
    run's validation table (``question_id, n, correct``), kept epoch and training log."""

    beta: float
    learning_rate: float
    nll_weight: float
    oracle: pl.DataFrame
    shuffled: pl.DataFrame | None  # None: not run (the oracle fell short of the threshold)
    validation: pl.DataFrame
    best_epoch: int
    log: Sequence[dict[str, float]]


def _per_question(samples: pl.DataFrame, questions: list[str]) -> np.ndarray:
    return per_question_pass_rate(samples, questions, "DPO search: an eval sample set")


def _moved(log: Sequence[dict[str, float]], key: str) -> float | None:
    """How far ``key`` moved from its first logged value to its last (None: never logged)."""
    values = [h[key] for h in log if key in h]
    return float(values[-1] - values[0]) if values else None


def _last(log: Sequence[dict[str, float]], key: str) -> float | None:
    values = [h[key] for h in log if key in h]
    return float(values[-1]) if values else None


def style_shift(base: pl.DataFrame, run: pl.DataFrame) -> float:
    """Total-variation distance (points) between two sample sets' style distributions."""
    from saturated_dag.pretrain.styles import detect_style

    def shares(frame: pl.DataFrame) -> dict[str, float]:
        styles = [detect_style(c) for c in frame["completion"]]
        return {s: styles.count(s) / len(styles) for s in set(styles)}

    a, b = shares(base), shares(run)
    return 50 * sum(abs(a.get(s, 0.0) - b.get(s, 0.0)) for s in set(a) | set(b))


def passes(oracle: Interval, shuffled: Interval, min_effect: float, null_band: float) -> bool:
    """DPO's controls at one recipe: the oracle gains ≥ ``min_effect`` with its interval above
    0, and the shuffled run's interval contains 0 within ±``null_band``."""
    return (oracle.estimate >= min_effect and oracle.low > 0
            and shuffled.low <= 0 <= shuffled.high
            and shuffled.low >= -null_band and shuffled.high <= null_band)


SCHEMA = {"NLL weight": pl.Float64, "β": pl.Float64, "η": pl.Float64, "epoch kept": pl.Int64,
          "validation pass@1": pl.Float64, "oracle Δ": pl.Float64, "oracle low": pl.Float64,
          "oracle high": pl.Float64, "shuffled Δ": pl.Float64, "shuffled low": pl.Float64,
          "shuffled high": pl.Float64, "passes": pl.Boolean, "reward margin (last)": pl.Float64,
          "chosen log-prob moved": pl.Float64, "rejected log-prob moved": pl.Float64,
          "style shift (TV, points)": pl.Float64, "chosen": pl.Boolean}
"""The search table's columns: one row per recipe, in search order."""


def search_table(runs: Sequence[SearchRun], base: pl.DataFrame, cells: Sequence[str],
                 min_effect: float, null_band: float, rule: str) -> pl.DataFrame:
    """One row per recipe (``SCHEMA``) on the eval ``cells`` that can show a style effect;
    ``chosen`` marks the recipe ``rule`` picks on validation (``selection.choose``)."""
    from saturated_dag.selection import choose

    if not runs:
        raise ValueError("DPO search: no recipe to read")
    base_in = base.filter(pl.col("cell").is_in(list(cells)))
    questions = sorted(base_in["question_id"].unique().to_list())
    base_m = _per_question(base_in, questions)[None, :]
    pick, _ = choose([r.validation for r in runs], [r.learning_rate for r in runs], rule)
    rows = []
    for i, run in enumerate(runs):
        deltas: dict[str, Interval | None] = {}
        for name, frame in (("oracle", run.oracle), ("shuffled", run.shuffled)):
            kept = None if frame is None else frame.filter(pl.col("cell").is_in(list(cells)))
            deltas[name] = None if kept is None else paired_delta(
                _per_question(kept, questions)[None, :], base_m).scaled(100)
        oracle, shuffled = deltas["oracle"], deltas["shuffled"]
        assert oracle is not None
        validation = run.validation
        rows.append({
            "NLL weight": run.nll_weight, "β": run.beta, "η": run.learning_rate,
            "epoch kept": run.best_epoch,
            "validation pass@1": 100 * float((validation["correct"] / validation["n"]).mean()),
            **{f"{name} {part}": None if d is None else getattr(d, attr)
               for name, d in deltas.items()
               for part, attr in (("Δ", "estimate"), ("low", "low"), ("high", "high"))},
            "passes": shuffled is not None and passes(oracle, shuffled, min_effect, null_band),
            "reward margin (last)": _last(run.log, "rewards/margins"),
            "chosen log-prob moved": _moved(run.log, "logps/chosen"),
            "rejected log-prob moved": _moved(run.log, "logps/rejected"),
            "style shift (TV, points)": style_shift(
                base_in, run.oracle.filter(pl.col("cell").is_in(list(cells)))),
            "chosen": i == pick})
    return pl.DataFrame(rows, schema=SCHEMA)


def _label(row: dict[str, Any]) -> str:
    nll = f", NLL {row['NLL weight']:g}" if row["NLL weight"] else ""
    return f"β={row['β']:g}, η={row['η']:.0e}{nll}"


def _median(table: pl.DataFrame, column: str) -> float | None:
    values = table[column].drop_nulls()
    return None if values.is_empty() else float(values.median())


def verdict(table: pl.DataFrame) -> dict[str, Any]:
    """What the search found: the passing recipes, the one the rule picked and whether it
    passes, and a diagnosis read off the oracle runs' margins and log-probabilities."""
    rows = table.to_dicts()
    passing = [_label(r) for r in rows if r["passes"]]
    chosen = next(r for r in rows if r["chosen"])
    best = max(rows, key=lambda r: r["oracle Δ"])
    parts = []
    for weight in sorted(set(table["NLL weight"].to_list())):
        arm = table.filter(pl.col("NLL weight") == weight)
        name = "plain DPO (the paper's)" if weight == 0 else f"DPO + NLL (weight {weight:g})"
        margin = _median(arm, "reward margin (last)")
        up = _median(arm, "chosen log-prob moved")
        down = _median(arm, "rejected log-prob moved")
        if margin is None or up is None or down is None:
            parts.append(f"{name}: no margins were logged")
            continue
        if margin < 0.5:
            how = "barely separated the pairs"
        elif up < 0:
            how = ("separated the pairs by pushing both log-probabilities down, the rejected "
                   "faster: the chosen completions did not become likelier")
        else:
            how = "separated the pairs and made the chosen completions likelier"
        parts.append(f"{name} {how} (medians over its {arm.height} recipes: last reward "
                     f"margin {margin:+.2f}, chosen log-prob {up:+.2f}, rejected {down:+.2f}; "
                     f"best oracle Δ {float(arm['oracle Δ'].max()):+.2f} points)")
    diagnosis = "; ".join(parts) + "."
    return {"recipes": len(rows), "passing": passing, "chosen": _label(chosen),
            "chosen passes": bool(chosen["passes"]),
            "best oracle Δ": {"recipe": _label(best), "Δ": best["oracle Δ"],
                              "low": best["oracle low"], "high": best["oracle high"]},
            "passed": bool(passing),
            "reading": ("DPO learns the planted signal at " + ", ".join(passing)
                        if passing else "no recipe passes DPO's controls: DPO is unvalidated "
                        "in the embedded world"),
            "diagnosis": diagnosis}


def search_figure(table: pl.DataFrame, logs: Sequence[Sequence[dict[str, float]]],
                  path: Path) -> Path:
    """Per NLL weight: the oracle's Δ pass@1 over β x η (each cell annotated with the oracle's
    and the shuffled control's Δ, a passing recipe outlined), and the oracle runs' reward
    margin per logged step, coloured by β."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.atomic import atomic_save_figure

    weights = sorted(set(table["NLL weight"].to_list()))
    betas = sorted(set(table["β"].to_list()))
    rates = sorted(set(table["η"].to_list()))
    fig, axes = plt.subplots(2, len(weights), figsize=(6 * len(weights), 9), dpi=130,
                             squeeze=False)
    span = max(5.0, float(table["oracle Δ"].abs().max()))
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(betas)))
    rows = table.to_dicts()
    for col, weight in enumerate(weights):
        grid = np.full((len(betas), len(rates)), np.nan)
        ax = axes[0][col]
        for r in rows:
            if r["NLL weight"] != weight:
                continue
            i, j = betas.index(r["β"]), rates.index(r["η"])
            grid[i, j] = r["oracle Δ"]
            control = "not run" if r["shuffled Δ"] is None else f"{r['shuffled Δ']:+.1f}"
            ax.text(j, i, f"{r['oracle Δ']:+.1f}\n({control})", ha="center", va="center",
                    fontsize=10)
            if r["passes"]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5,
                                           color="black"))
        image = ax.imshow(grid, cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
        ax.set_xticks(range(len(rates)), [f"{v:.0e}" for v in rates])
        ax.set_yticks(range(len(betas)), [f"{v:g}" for v in betas])
        ax.set_xlabel("learning rate η")
        ax.set_ylabel("β")
        name = "plain DPO" if weight == 0 else f"DPO + NLL (weight {weight:g})"
        ax.set_title(f"{name}: oracle Δ pass@1 (shuffled Δ); outlined: passes")
        fig.colorbar(image, ax=ax, label="Δ pass@1 (points)")
        ax = axes[1][col]
        for r, log in zip(rows, logs, strict=True):
            if r["NLL weight"] != weight:
                continue
            steps = [h["step"] for h in log if "rewards/margins" in h]
            margins = [h["rewards/margins"] for h in log if "rewards/margins" in h]
            ax.plot(steps, margins, color=colours[betas.index(r["β"])], alpha=0.7,
                    lw=1 + 2 * rates.index(r["η"]) / max(1, len(rates) - 1))
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("reward margin (oracle pairs)")
        ax.set_title(f"{name}: margin over training (thicker: larger η)")
        for b, colour in zip(betas, colours, strict=True):
            ax.plot([], [], color=colour, label=f"β={b:g}")
        ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)
    return path
