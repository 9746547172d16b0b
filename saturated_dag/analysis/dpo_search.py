"""DPO's recipe search and diagnosis: does DPO learn a known signal at any recipe and loss,
and if not, why? (``docs/testbed.md``, "DPO's recipe search" and "DPO's diagnosis").

A search profile trains DPO on a signal's pairs and on the same signal shuffled, at every
recipe its selection lists (loss type x β x NLL anchor weight x η), on each data seed. Signals:
**planted** (the oracle's pairs on the saturated split against its shuffled scores, read on the
validation questions of the cells where the base model's styles differ in accuracy) and
**correctness** (the hard split's correct-vs-incorrect pairs against the same pairs half
swapped, read on every validation question).

Per recipe and signal, from the adapters' own files: Δ validation pass@1 of the signal's runs,
of the shuffled runs, and between them, each with its paired 95% interval (``paired_delta``);
whether the recipe passes the signal's control (``passes``: planted, DPO's testbed rule with
``dpo_min_effect`` and ``null_band``; correctness, the hard split's rule with
``hard_min_effect``); the training logs' last reward margin, chosen and rejected log-ratios
and how far the log-probabilities moved; and the style shift from the base model.

The recipe the profile's rule chose is marked; SFT's Δ on the same split, where the run trains
it, is the signal's reference (``reference_deltas``). ``verdict`` says, per signal and loss,
what passed and which cause the numbers point to. Pure functions over frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from saturated_dag.analysis.testbed import effect_passes
from saturated_dag.evaluation.statistics import Interval, paired_delta
from saturated_dag.schemas import schema

if TYPE_CHECKING:
    from saturated_dag.config import TrainingSettings
    from saturated_dag.experiments import Configuration

RECIPE = ("dpo_loss_type", "dpo_beta", "dpo_nll_weight", "learning_rate")
"""The settings a recipe is named by (the DPO settings ``training.selection`` varies)."""
Recipe = tuple[str, float, float, float]
"""(loss type, β, NLL weight, η)."""


def recipe_of(configuration: Configuration, training: TrainingSettings) -> Recipe:
    """The DPO recipe ``configuration`` trains under ``training`` (its ``RECIPE`` settings,
    after the configuration's overrides)."""
    effective = configuration.training(training)
    return (effective.dpo_loss_type, effective.dpo_beta, effective.dpo_nll_weight,
            effective.learning_rate)
PAPER_LOSS = "sigmoid"
"""The DPO paper's loss, the paper's DPO."""


@dataclass(frozen=True)
class Signal:
    """A known signal and its shuffled partner: ``positive`` and ``negative`` name the runs'
    cells (the scorer, or the hard split's pair pick), ``questions`` the validation questions
    it is read on (None: all), ``rule`` how its control passes (``base``: DPO's testbed rule
    against the base model; ``contrast``: the signal against its shuffle), at ``min_effect``
    points."""

    name: Literal["planted", "correctness"]
    positive: str
    negative: str
    rule: Literal["base", "contrast"]
    min_effect: float
    questions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SearchRun:
    """One trained adapter of the search: its recipe, the cell (scorer or pair pick) whose
    pairs it trained on, its data seed, and what its training left: the kept epoch, the
    training log (``result.json``'s ``log_history``), the kept epoch's per-question
    validation results (``question_id, n, correct``) and completions
    (``question_id, completion``)."""

    recipe: Recipe
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
    """(data seeds, 1 training seed, questions) pass rates of one recipe's runs of a cell."""
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


def log_ratios(log: Sequence[Mapping[str, float]], beta: float, side: str
               ) -> tuple[list[float], list[float]]:
    """The logged steps and the ``side`` (``chosen``/``rejected``) completions' mean
    log-ratio to the reference model at each: TRL logs ``rewards/<side>`` = β x that ratio for
    every loss type."""
    key = f"rewards/{side}"
    kept = [h for h in log if key in h]
    return [h.get("step", i + 1) for i, h in enumerate(kept)], [h[key] / beta for h in kept]


def _last_ratio(log: Sequence[Mapping[str, float]], side: str, beta: float) -> float | None:
    _, values = log_ratios(log, beta, side)
    return values[-1] if values else None


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


def contrast_passes(contrast: Interval, min_effect: float) -> bool:
    """A signal against its shuffle (the hard split's known-signal rule): ≥ ``min_effect``
    points with the interval above 0, the testbed's rule for every positive control."""
    return effect_passes(contrast, min_effect)


SCHEMA = "dpo_recipe_search"
"""The search table's declared schema (``saturated_dag/schemas.py``): one row per signal and
recipe, in configuration order. Δ in points of validation pass@1; the log columns are the
signal's runs' means over data seeds."""


def reference_deltas(signal: Signal, runs: Sequence[SearchRun], base: pl.DataFrame
                     ) -> list[dict[str, Any]]:
    """SFT on the signal's split (``runs``: its adapters, each recipe's η its own), against the
    base model on the signal's questions: per η its Δ validation pass@1 with the paired 95%
    interval, and whether it reaches the signal's bar (``min_effect``, interval above 0)."""
    questions = _questions(signal, base)
    base_m = _rates(base, questions, "the base model")[None, :]
    out = []
    for lr in sorted({r.recipe[3] for r in runs}):
        delta = paired_delta(_matrix([r for r in runs if r.recipe[3] == lr], questions),
                             base_m).scaled(100)
        out.append({"η": lr, "Δ": delta.estimate, "low": delta.low, "high": delta.high,
                    "reaches the bar": contrast_passes(delta, signal.min_effect)})
    return out


def _questions(signal: Signal, base: pl.DataFrame) -> list[str]:
    every = sorted(base["question_id"].to_list())
    if signal.questions is None:
        return every
    missing = sorted(set(signal.questions) - set(every))
    if missing:
        raise ValueError(f"DPO search: the base model has no validation result for "
                         f"{len(missing)} of the {signal.name} signal's questions")
    return sorted(signal.questions)


def search_table(runs: Sequence[SearchRun], base: pl.DataFrame,
                 base_samples: pl.DataFrame | None, signals: Sequence[Signal],
                 chosen: Mapping[str, Recipe | None], null_band: float) -> pl.DataFrame:
    """One row per signal and recipe (the ``SCHEMA`` frame kind): each signal's runs against
    its shuffled runs and the base model's validation results ``base``
    (``question_id, n, correct``) and completions; ``chosen`` is, per signal, the recipe the
    profile's rule picked on the signal's cell."""
    if not runs:
        raise ValueError("DPO search: no trained recipe to read")
    keys = [(r.recipe, r.scorer, r.data_seed) for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError("DPO search: two runs share a recipe, cell and data seed; the selection "
                         "may vary only the loss, β, the NLL weight and η (and one training "
                         "seed)")
    rows = []
    for signal in signals:
        questions = _questions(signal, base)
        ids = set(questions)
        base_m = _rates(base, questions, "the base model")[None, :]
        reference = (style_shares(base_samples.filter(pl.col("question_id").is_in(ids)))
                     if base_samples is not None else {})
        mine = [r for r in runs if r.scorer in (signal.positive, signal.negative)]
        for recipe in dict.fromkeys(r.recipe for r in mine):
            by_cell = {name: [r for r in mine if r.recipe == recipe and r.scorer == name]
                       for name in (signal.positive, signal.negative)}
            missing = [name for name, found in by_cell.items() if not found]
            if missing:
                raise ValueError(f"DPO search: recipe {recipe_text(recipe)} of the "
                                 f"{signal.name} signal has no run on {', '.join(missing)}")
            matrices = {name: _matrix(found, questions) for name, found in by_cell.items()}
            deltas = {name: paired_delta(m, base_m).scaled(100) for name, m in matrices.items()}
            contrast = paired_delta(matrices[signal.positive],
                                    matrices[signal.negative]).scaled(100)
            ok = (passes(deltas[signal.positive], deltas[signal.negative], signal.min_effect,
                         null_band) if signal.rule == "base"
                  else contrast_passes(contrast, signal.min_effect))
            own = by_cell[signal.positive]
            samples = [r.samples.filter(pl.col("question_id").is_in(ids)) for r in own
                       if r.samples is not None]
            shares = style_shares(pl.concat(samples)) if samples else {}
            beta = recipe[1]
            rows.append({
                "signal": signal.name, "DPO loss": recipe[0], "NLL weight": recipe[2],
                "β": beta, "η": recipe[3],
                "epochs kept": ",".join(str(r.best_epoch) for r in
                                        sorted(own, key=lambda r: r.data_seed)),
                **{f"{label} {part}": getattr(interval, attr)
                   for label, interval in (("signal", deltas[signal.positive]),
                                           ("shuffled", deltas[signal.negative]),
                                           ("contrast", contrast))
                   for part, attr in (("Δ", "estimate"), ("low", "low"), ("high", "high"))},
                "passes": ok,
                "reward margin (last)": _mean([_last(r.log, "rewards/margins") for r in own]),
                **{f"{side} log-ratio (last)": _mean([_last_ratio(r.log, side, beta)
                                                      for r in own])
                   for side in ("chosen", "rejected")},
                "chosen log-prob moved": _mean([_moved(r.log, "logps/chosen") for r in own]),
                "rejected log-prob moved": _mean([_moved(r.log, "logps/rejected")
                                                  for r in own]),
                "style shift (TV, points)": (style_shift(reference, shares)
                                             if shares and reference else None),
                "steps share": 100 * shares["steps"] if "steps" in shares else (
                    0.0 if shares else None),
                "chosen by the rule": recipe == chosen.get(signal.name)})
    return pl.DataFrame(rows, schema=schema(SCHEMA))


def recipe_text(recipe: Recipe) -> str:
    loss, beta, nll, lr = recipe
    return recipe_label({"DPO loss": loss, "β": beta, "NLL weight": nll, "η": lr})


def recipe_label(row: Mapping[str, Any], with_loss: bool = True) -> str:
    """``β=5, η=1e-04`` with the loss first when it is not the paper's (``with_loss``) and the
    NLL weight last when there is one."""
    loss = "" if row["DPO loss"] == PAPER_LOSS or not with_loss else f"{row['DPO loss']}, "
    nll = f", NLL {row['NLL weight']:g}" if row["NLL weight"] else ""
    return f"{loss}β={row['β']:g}, η={row['η']:.0e}{nll}"


def arm_label(loss: str, nll: float) -> str:
    """A loss and anchor, as a reader names it: the paper's DPO, ``ipo``, ``DPO + NLL``."""
    name = "plain DPO (the paper's)" if loss == PAPER_LOSS else f"DPO with the {loss} loss"
    return name if not nll else f"{name} + NLL (weight {nll:g})"


SEPARATED = 0.5
"""A last reward margin (β-scaled log-ratio gap, nats) from which a run counts as having
separated its pairs."""


def _median(table: pl.DataFrame, column: str) -> float | None:
    values = table[column].drop_nulls()
    return None if values.is_empty() else float(values.median())


def _arm_diagnosis(name: str, arm: pl.DataFrame) -> str:
    """What one arm's margins and log-probabilities show, over its recipes."""
    moved = arm.filter(pl.col("reward margin (last)") >= SEPARATED)
    if moved.is_empty():
        return (f"{name} barely separated the pairs at any of its {arm.height} recipes "
                f"(every last reward margin below {SEPARATED:g})")
    up = _median(moved, "chosen log-prob moved")
    down = _median(moved, "rejected log-prob moved")
    assert up is not None and down is not None
    how = ("pushed the rejected completions down, and the chosen ones down with them"
           if up < -0.05 else "pushed the rejected completions down while the chosen "
           "ones barely moved" if up <= 0.05 else "made the chosen completions likelier "
           "and the rejected ones less likely")
    top = moved.row(int(moved["signal Δ"].arg_max() or 0), named=True)
    follows = ("validation pass@1 rose" if top["signal low"] > 0
               else "validation pass@1 did not follow")
    return (f"{name}: at the {moved.height} of its {arm.height} recipes that separated the "
            f"pairs (last reward margin at least {SEPARATED:g}) it {how} (medians: chosen "
            f"log-prob {up:+.2f}, rejected {down:+.2f}), and {follows} (best Δ "
            f"{top['signal Δ']:+.2f} [{top['signal low']:+.2f}, {top['signal high']:+.2f}] at "
            f"{recipe_label(top, with_loss=False)}; worst "
            f"{float(moved['signal Δ'].min()):+.2f})")


def _arms(table: pl.DataFrame) -> list[tuple[str, float]]:
    return list(dict.fromkeys(zip(table["DPO loss"].to_list(), table["NLL weight"].to_list(),
                                  strict=True)))


def _signal_verdict(table: pl.DataFrame) -> dict[str, Any]:
    rows = table.to_dicts()
    passing = [recipe_label(r) for r in rows if r["passes"]]
    chosen = next((r for r in rows if r["chosen by the rule"]), None)
    best = max(rows, key=lambda r: r["signal Δ"])
    by_arm = {}
    for loss, nll in _arms(table):
        arm = table.filter((pl.col("DPO loss") == loss) & (pl.col("NLL weight") == nll))
        top = max(arm.to_dicts(), key=lambda r: r["signal Δ"])
        by_arm[arm_label(loss, nll)] = {
            "loss": loss, "NLL weight": nll, "recipes": arm.height,
            "passing": [recipe_label(r, with_loss=False) for r in arm.to_dicts()
                        if r["passes"]],
            "best": {"recipe": recipe_label(top, with_loss=False), "Δ": top["signal Δ"],
                     "low": top["signal low"], "high": top["signal high"],
                     "shuffled Δ": top["shuffled Δ"], "contrast Δ": top["contrast Δ"],
                     "contrast low": top["contrast low"],
                     "contrast high": top["contrast high"]},
            "diagnosis": _arm_diagnosis(arm_label(loss, nll), arm)}
    return {"recipes": len(rows), "passing": passing, "passed": bool(passing),
            "chosen": None if chosen is None else recipe_label(chosen),
            "chosen passes": bool(chosen["passes"]) if chosen is not None else False,
            "best Δ": {"recipe": recipe_label(best), "Δ": best["signal Δ"],
                       "low": best["signal low"], "high": best["signal high"]},
            "by loss": by_arm,
            "diagnosis": "; ".join(a["diagnosis"] for a in by_arm.values()) + "."}


def verdict(table: pl.DataFrame,
            references: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
            ) -> dict[str, Any]:
    """What the search found, per signal (its passing recipes, the rule's choice, the best Δ
    and, per loss and anchor, a diagnosis read off the margins and log-probabilities; SFT's
    Δ on the same training questions where the run trains it, ``references``), and the cause
    the signals point to together (``reading``)."""
    signals = {name: _signal_verdict(table.filter(pl.col("signal") == name))
               for name in dict.fromkeys(table["signal"].to_list())}
    for name, rows in (references or {}).items():
        if name in signals and rows:
            signals[name]["SFT reference"] = {
                "by η": list(rows), "best": max(rows, key=lambda r: r["Δ"]),
                "reaches the bar": any(r["reaches the bar"] for r in rows)}
    return {"signals": signals, **_cause(signals)}


def _cause(signals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Which of the issue's three readings holds: some loss learns the planted signal; DPO
    learns correctness but no loss learns the planted signal; DPO learns neither."""
    planted, correctness = signals.get("planted"), signals.get("correctness")
    learned = ([a for a, v in planted["by loss"].items() if v["passing"]]
               if planted else [])
    if learned:
        return {"cause": "a loss learns the planted signal",
                "reading": "DPO learns the planted signal with " + "; ".join(
                    f"{arm} at {'; '.join(planted['by loss'][arm]['passing'])}"  # type: ignore[index]
                    for arm in learned)}
    if planted is None:
        return {"cause": "no planted signal", "reading": "this run trains no planted signal"}
    unvalidated = ("no recipe passes DPO's planted-signal control: DPO is unvalidated on "
                   "saturated pairs in the embedded world")
    if correctness is None:
        return {"cause": "planted signal not learned", "reading": unvalidated}
    if correctness["passed"]:
        return {"cause": "DPO learns correctness, not the planted signal",
                "reading": f"DPO learns correctness here ({', '.join(correctness['passing'])})"
                           f" but no loss learns the planted signal: {unvalidated}"}
    neither = ("DPO learns neither correctness nor the planted signal at any recipe or loss "
               "here")
    reference = correctness.get("SFT reference")
    if reference is None:
        return {"cause": "DPO learns neither",
                "reading": f"{neither}: the trainer, the recipe or the data size is in "
                           "question, not the saturated pairs alone (the diagnosis says what "
                           "the margins and log-probabilities did)"}
    best = reference["best"]
    sft = (f"SFT on the same hard questions' correct completions gains {best['Δ']:+.2f} "
           f"[{best['low']:+.2f}, {best['high']:+.2f}] at its best η ({best['η']:.0e})")
    if reference["reaches the bar"]:
        return {"cause": "DPO fails where SFT learns",
                "reading": f"{neither}, while {sft}: the same data teaches SFT, so DPO's "
                           "losses at these recipes are what fails here (the diagnosis says "
                           "what the margins and log-probabilities did)"}
    return {"cause": "the correctness data teaches no method",
            "reading": f"{neither}; {sft}, below the correctness bar too: at this size the "
                       "hard split's correct-vs-incorrect signal teaches no method here, so "
                       "the correctness control cannot show whether DPO itself works. DPO "
                       "stays unvalidated, and its null on saturated pairs cannot be read as "
                       "\"the signal is wrong for DPO\""}


def search_figure(table: pl.DataFrame, runs: Sequence[SearchRun],
                  signals: Sequence[Signal], path: Path) -> Path:
    """Per signal: its Δ validation pass@1 over loss (and anchor) x β rows and η columns
    (each cell annotated with the signal's and the shuffled runs' Δ, a passing recipe
    outlined, the rule's choice starred), then each arm's chosen (solid) and rejected
    (dashed) log-ratio over training at its best recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.infra.atomic import atomic_save_figure
    from saturated_dag.reporting.plots import DPI, UI_WIDTH

    shown = [s for s in signals if s.name in set(table["signal"].to_list())]
    rows_per = [len(_arms(table.filter(pl.col("signal") == s.name)))
                * table.filter(pl.col("signal") == s.name)["β"].n_unique() for s in shown]
    heights = [h for r in rows_per for h in (max(2.5, 0.32 * r + 1.2), 3.2)]
    # UI_WIDTH at DPI: within the UI's figure dialog (plots.UI_WIDTH)
    fig, axes = plt.subplots(len(heights), 1, figsize=(UI_WIDTH, sum(heights)), dpi=DPI,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    span = max(5.0, float(table["signal Δ"].abs().max()))
    for index, signal in enumerate(shown):
        part = table.filter(pl.col("signal") == signal.name)
        arms, betas = _arms(part), sorted(set(part["β"].to_list()))
        rates = sorted(set(part["η"].to_list()))
        labels = [(a, b) for a in arms for b in betas]
        matrix = np.full((len(labels), len(rates)), np.nan)
        ax = axes[2 * index][0]
        for r in part.to_dicts():
            i = labels.index(((r["DPO loss"], r["NLL weight"]), r["β"]))
            j = rates.index(r["η"])
            matrix[i, j] = r["signal Δ"]
            star = " *" if r["chosen by the rule"] else ""
            ax.text(j, i, f"{r['signal Δ']:+.1f}{star} ({r['shuffled Δ']:+.1f})",
                    ha="center", va="center", fontsize=8,
                    color="white" if abs(r["signal Δ"]) > span / 2 else "black")
            if r["passes"]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2,
                                           color="black"))
        image = ax.imshow(matrix, cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
        ax.set_xticks(range(len(rates)), [f"η {v:.0e}" for v in rates], fontsize=8)
        ax.set_yticks(range(len(labels)),
                      [f"{loss}{f' + NLL {nll:g}' if nll else ''}, β {b:g}"
                       for (loss, nll), b in labels], fontsize=8)
        ax.set_title(f"{signal.name} signal ({signal.positive} vs {signal.negative}): Δ "
                     "validation pass@1 (shuffled Δ in brackets;\noutlined: passes; *: the "
                     "rule's choice)", fontsize=9)
        fig.colorbar(image, ax=ax, label="Δ to the base model (points)", pad=0.01)
        ax = axes[2 * index + 1][0]
        colours = plt.get_cmap("tab10")(np.arange(len(arms)) % 10)
        for arm, colour in zip(arms, colours, strict=True):
            rows = part.filter((pl.col("DPO loss") == arm[0]) & (pl.col("NLL weight") == arm[1]))
            top = rows.row(int(rows["signal Δ"].arg_max() or 0), named=True)
            recipe = (top["DPO loss"], top["β"], top["NLL weight"], top["η"])
            for run in runs:
                if run.recipe != recipe or run.scorer != signal.positive:
                    continue
                for side, style in (("chosen", "-"), ("rejected", "--")):
                    steps, values = log_ratios(run.log, recipe[1], side)
                    ax.plot(steps, values, style, color=colour, lw=1, alpha=0.8)
            ax.plot([], [], color=colour, label=f"{arm[0]}{' + NLL' if arm[1] else ''}: "
                    f"{recipe_label(top, with_loss=False)}")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.set_ylabel("log-ratio to the reference", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_title(f"{signal.name} signal: chosen (solid) and rejected (dashed) log-ratio "
                     "over training,\neach arm at its best recipe", fontsize=9)
        ax.legend(fontsize=7, loc="best", ncol=2, framealpha=0.8)
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)
    return path
