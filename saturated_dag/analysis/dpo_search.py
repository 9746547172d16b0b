"""DPO's recipe search in the calibrated testbed: does DPO learn the planted signal at any
recipe, and if not, why? (issue 45; ``docs/testbed.md``, "DPO's recipe search").

The ``dpo_search`` profile trains DPO on the oracle's pairs and on its shuffled control at
every recipe its selection lists (β x NLL anchor weight x learning rate, each run keeping its
best epoch of up to 4 on validation), on each data seed. Per recipe this module reads, from the
adapters' own files:

- Δ validation pass@1 to the base model of the oracle's runs and of the shuffled runs, each
  with its paired 95% interval (data seeds, then questions, resampled: ``paired_delta``);
- whether the recipe passes DPO's controls (``passes``): the oracle at least
  ``dpo_min_effect`` points with its interval above 0, the shuffled runs' interval containing
  0 within ±``null_band``;
- the oracle runs' training logs: the last reward margin, and how far the chosen and the
  rejected completions' log-probabilities moved from the first logged step (the paper tracks
  margins; a margin that grows while the chosen log-probability does not rise separates the
  pair without making the chosen completion likelier);
- the style shift: the total-variation distance (points) between the base model's and the
  oracle runs' solution styles on the validation questions.

The recipe the profile's rule chose on the oracle cell (its selection table) is marked. A
diagnosis says what the margins and log-probabilities show. Pure functions over frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from saturated_dag.evaluation.statistics import Interval, paired_delta
from saturated_dag.schemas import schema

RECIPE = ("dpo_beta", "dpo_nll_weight", "learning_rate")
"""The settings a recipe is named by (the DPO settings ``training.selection`` varies)."""


@dataclass(frozen=True)
class SearchRun:
    """One trained adapter of the search: its recipe, the scorer whose pairs it trained on,
    its data seed, and what its training left: the kept epoch, the training log
    (``result.json``'s ``log_history``), the kept epoch's per-question validation results
    (``question_id, n, correct``) and completions (``question_id, completion``)."""

    recipe: tuple[float, float, float]  # (β, NLL weight, η)
    scorer: str
    data_seed: int
    best_epoch: int
    log: Sequence[Mapping[str, float]]
    validation: pl.DataFrame
    samples: pl.DataFrame | None = field(default=None, compare=False)


def _rates(validation: pl.DataFrame, questions: Sequence[str], what: str) -> np.ndarray:
    """Per-question pass rates in the order of ``questions``."""
    rates = dict(zip(validation["question_id"].to_list(),
                     (validation["correct"] / validation["n"]).to_list(), strict=True))
    missing = [q for q in questions if q not in rates]
    if missing:
        raise ValueError(f"DPO search: {what} has no validation result for {len(missing)} of "
                         f"the {len(questions)} validation questions (first: {missing[0]})")
    return np.array([rates[q] for q in questions], dtype=float)


def _matrix(runs: Sequence[SearchRun], questions: Sequence[str]) -> np.ndarray:
    """(data seeds, 1 training seed, questions) pass rates of one recipe's runs of a scorer."""
    ordered = sorted(runs, key=lambda r: r.data_seed)
    return np.stack([_rates(r.validation, questions, f"the run of data seed {r.data_seed}")
                     [None, :] for r in ordered])


def _moved(log: Sequence[Mapping[str, float]], key: str) -> float | None:
    """How far ``key`` moved from its first logged value to its last (None: never logged)."""
    values = [h[key] for h in log if key in h]
    return float(values[-1] - values[0]) if values else None


def _last(log: Sequence[Mapping[str, float]], key: str) -> float | None:
    values = [h[key] for h in log if key in h]
    return float(values[-1]) if values else None


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def style_shares(samples: pl.DataFrame) -> dict[str, float]:
    """Each solution style's share of ``samples``' completions (``detect_style``)."""
    from saturated_dag.tasks.solution_styles import detect_style

    styles = [detect_style(c) for c in samples["completion"].to_list()]
    return {s: styles.count(s) / len(styles) for s in sorted(set(styles))} if styles else {}


def style_shift(base: Mapping[str, float], run: Mapping[str, float]) -> float:
    """Total-variation distance (points) between two style distributions."""
    return 50 * sum(abs(base.get(s, 0.0) - run.get(s, 0.0)) for s in set(base) | set(run))


def passes(oracle: Interval, shuffled: Interval, min_effect: float, null_band: float) -> bool:
    """DPO's controls at one recipe: the oracle gains ≥ ``min_effect`` with its interval above
    0, and the shuffled runs' interval contains 0 within ±``null_band``."""
    return (oracle.estimate >= min_effect and oracle.low > 0
            and shuffled.low <= 0 <= shuffled.high
            and shuffled.low >= -null_band and shuffled.high <= null_band)


SCHEMA = "dpo_recipe_search"
"""The search table's declared schema (``saturated_dag/schemas.py``): one row per recipe, in
configuration order. Δ in points of validation pass@1 to the base model; the log columns are the
oracle runs' means over data seeds."""


def search_table(runs: Sequence[SearchRun], base: pl.DataFrame,
                 base_samples: pl.DataFrame | None, positive: str, negative: str,
                 chosen: tuple[float, float, float] | None, min_effect: float,
                 null_band: float) -> pl.DataFrame:
    """One row per recipe (the ``SCHEMA`` frame kind): ``runs`` of the ``positive`` scorer
    (the oracle) and the ``negative`` one (its shuffle) against the base model's validation
    results ``base`` (``question_id, n, correct``) and completions; ``chosen`` is the recipe
    the profile's rule picked on the oracle cell."""
    if not runs:
        raise ValueError("DPO search: no trained recipe to read")
    keys = [(r.recipe, r.scorer, r.data_seed) for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError("DPO search: two runs share a recipe, scorer and data seed; the selection "
                         "may vary only β, the NLL weight and η (and one training seed)")
    questions = sorted(base["question_id"].to_list())
    base_m = _rates(base, questions, "the base model")[None, :]
    base_styles = style_shares(base_samples) if base_samples is not None else {}
    recipes = list(dict.fromkeys(r.recipe for r in runs))
    rows = []
    for recipe in recipes:
        by_scorer = {name: [r for r in runs if r.recipe == recipe and r.scorer == name]
                     for name in (positive, negative)}
        missing = [name for name, found in by_scorer.items() if not found]
        if missing:
            raise ValueError(f"DPO search: recipe β={recipe[0]:g}, NLL {recipe[1]:g}, "
                             f"η={recipe[2]:g} has no run on {', '.join(missing)}")
        deltas = {name: paired_delta(_matrix(found, questions), base_m).scaled(100)
                  for name, found in by_scorer.items()}
        oracle_runs = by_scorer[positive]
        samples = [r.samples for r in oracle_runs if r.samples is not None]
        shares = style_shares(pl.concat(samples)) if samples else {}
        rows.append({
            "NLL weight": recipe[1], "β": recipe[0], "η": recipe[2],
            "epochs kept": ",".join(str(r.best_epoch) for r in
                                    sorted(oracle_runs, key=lambda r: r.data_seed)),
            **{f"{label} {part}": getattr(deltas[name], attr)
               for label, name in (("oracle", positive), ("shuffled", negative))
               for part, attr in (("Δ", "estimate"), ("low", "low"), ("high", "high"))},
            "passes": passes(deltas[positive], deltas[negative], min_effect, null_band),
            "reward margin (last)": _mean([_last(r.log, "rewards/margins")
                                           for r in oracle_runs]),
            "chosen log-prob moved": _mean([_moved(r.log, "logps/chosen") for r in oracle_runs]),
            "rejected log-prob moved": _mean([_moved(r.log, "logps/rejected")
                                              for r in oracle_runs]),
            "style shift (TV, points)": (style_shift(base_styles, shares)
                                         if shares and base_styles else None),
            "steps share": 100 * shares["steps"] if "steps" in shares else (
                0.0 if shares else None),
            "chosen by the rule": recipe == chosen})
    return pl.DataFrame(rows, schema=schema(SCHEMA))


def recipe_label(row: Mapping[str, Any]) -> str:
    nll = f", NLL {row['NLL weight']:g}" if row["NLL weight"] else ""
    return f"β={row['β']:g}, η={row['η']:.0e}{nll}"


SEPARATED = 0.5
"""A last reward margin (β-scaled log-ratio gap, nats) from which a run counts as having
separated its pairs."""


def _median(table: pl.DataFrame, column: str) -> float | None:
    values = table[column].drop_nulls()
    return None if values.is_empty() else float(values.median())


def verdict(table: pl.DataFrame) -> dict[str, Any]:
    """What the search found: the passing recipes, the one the rule chose and whether it
    passes, the best oracle Δ, and a diagnosis read off the oracle runs' margins and
    log-probabilities, per arm (plain DPO, DPO + NLL)."""
    rows = table.to_dicts()
    passing = [recipe_label(r) for r in rows if r["passes"]]
    chosen = next((r for r in rows if r["chosen by the rule"]), None)
    best = max(rows, key=lambda r: r["oracle Δ"])
    parts = []
    for weight in sorted(set(table["NLL weight"].to_list())):
        arm = table.filter(pl.col("NLL weight") == weight)
        name = "plain DPO (the paper's)" if weight == 0 else f"DPO + NLL (weight {weight:g})"
        moved = arm.filter(pl.col("reward margin (last)") >= SEPARATED)
        if moved.is_empty():
            parts.append(f"{name} barely separated the pairs at any of its {arm.height} "
                         f"recipes (every last reward margin below {SEPARATED:g})")
            continue
        up = _median(moved, "chosen log-prob moved")
        down = _median(moved, "rejected log-prob moved")
        assert up is not None and down is not None
        how = ("pushed the rejected completions down, and the chosen ones down with them"
               if up < -0.05 else "pushed the rejected completions down while the chosen "
               "ones barely moved" if up <= 0.05 else "made the chosen completions likelier "
               "and the rejected ones less likely")
        top = moved.row(int(moved["oracle Δ"].arg_max() or 0), named=True)
        follows = ("validation pass@1 rose" if top["oracle low"] > 0
                   else "validation pass@1 did not follow")
        parts.append(f"{name}: at the {moved.height} of its {arm.height} recipes that "
                     f"separated the pairs (last reward margin at least {SEPARATED:g}) it {how} "
                     f"(medians: chosen log-prob {up:+.2f}, rejected {down:+.2f}), and "
                     f"{follows} (best oracle Δ {top['oracle Δ']:+.2f} "
                     f"[{top['oracle low']:+.2f}, {top['oracle high']:+.2f}] at "
                     f"{recipe_label(top)}; worst {float(moved['oracle Δ'].min()):+.2f})")
    return {"recipes": len(rows), "passing": passing,
            "chosen": None if chosen is None else recipe_label(chosen),
            "chosen passes": bool(chosen["passes"]) if chosen is not None else False,
            "best oracle Δ": {"recipe": recipe_label(best), "Δ": best["oracle Δ"],
                              "low": best["oracle low"], "high": best["oracle high"]},
            "passed": bool(passing),
            "reading": ("DPO learns the planted signal at " + "; ".join(passing)
                        if passing else "no recipe passes DPO's controls: DPO is "
                        "unvalidated in the embedded world"),
            "diagnosis": "; ".join(parts) + "."}


def search_figure(table: pl.DataFrame, runs: Sequence[SearchRun], positive: str,
                  path: Path) -> Path:
    """Per NLL weight: the oracle's Δ validation pass@1 over β x η (each cell annotated with
    the oracle's and the shuffled runs' Δ, a passing recipe outlined, the rule's choice
    starred), and the oracle runs' reward margin per logged step, coloured by β."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.infra.atomic import atomic_save_figure

    weights = sorted(set(table["NLL weight"].to_list()))
    betas = sorted(set(table["β"].to_list()))
    rates = sorted(set(table["η"].to_list()))
    fig, axes = plt.subplots(2, len(weights), figsize=(6.5 * len(weights), 10), dpi=130,
                             squeeze=False)
    span = max(5.0, float(table["oracle Δ"].abs().max()))
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(betas)))
    rows = table.to_dicts()
    for col, weight in enumerate(weights):
        name = "plain DPO" if weight == 0 else f"DPO + NLL (weight {weight:g})"
        matrix = np.full((len(betas), len(rates)), np.nan)
        ax = axes[0][col]
        for r in rows:
            if r["NLL weight"] != weight:
                continue
            i, j = betas.index(r["β"]), rates.index(r["η"])
            matrix[i, j] = r["oracle Δ"]
            star = " *" if r["chosen by the rule"] else ""
            ax.text(j, i, f"{r['oracle Δ']:+.1f}{star}\n({r['shuffled Δ']:+.1f})",
                    ha="center", va="center", fontsize=11)
            if r["passes"]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5,
                                           color="black"))
        image = ax.imshow(matrix, cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
        ax.set_xticks(range(len(rates)), [f"{v:.0e}" for v in rates], fontsize=11)
        ax.set_yticks(range(len(betas)), [f"{v:g}" for v in betas], fontsize=11)
        ax.set_xlabel("learning rate η", fontsize=12)
        ax.set_ylabel("β", fontsize=12)
        ax.set_title(f"{name}: oracle Δ validation pass@1\n(shuffled Δ below; outlined: "
                     "passes; *: the rule's choice)", fontsize=12)
        fig.colorbar(image, ax=ax, label="Δ pass@1 to the base model (points)")
        ax = axes[1][col]
        for run in runs:
            beta, nll, lr = run.recipe
            if run.scorer != positive or nll != weight:
                continue
            steps = [h["step"] for h in run.log if "rewards/margins" in h]
            margins = [h["rewards/margins"] for h in run.log if "rewards/margins" in h]
            ax.plot(steps, margins, color=colours[betas.index(beta)], alpha=0.7,
                    lw=0.8 + 2 * rates.index(lr) / max(1, len(rates) - 1))
        ax.set_xlabel("optimizer step", fontsize=12)
        ax.set_ylabel("reward margin (oracle pairs)", fontsize=12)
        ax.set_title(f"{name}: reward margin over training (thicker: larger η)", fontsize=12)
        for beta, colour in zip(betas, colours, strict=True):
            ax.plot([], [], color=colour, label=f"β={beta:g}")
        ax.legend(fontsize=10, loc="upper left")
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)
    return path
