"""The calibrated testbed's analysis (``docs/testbed.md``): a planted effect must be found,
none where none is planted, and the effect must fall as the signal gets noisier.

The rows are ordinary cells of the plan (the oracle, ``scorers.oracle``, ranks saturated
completions by the more accurate style); this module reads their eval reports. Each row's
paired Δ pass@1 to the base model has its 95% interval over data seeds × training seeds ×
questions (``statistics.paired_delta``). Each method is read against its own controls: the
oracle (Δ ≥ its minimum, interval above 0), the shuffled oracle (interval within
±``null_band`` around 0) and the dial (Spearman ≥ 0.8); SFT's is RAFT on the oracle's best
completion against RAFT on a random correct one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from saturated_dag.analysis.findings import Control, subject
from saturated_dag.config import TestbedSettings
from saturated_dag.evaluation.statistics import Interval, paired_delta, seed_matrix
from saturated_dag.experiments import HARD_PAIRS_SHUFFLED
from saturated_dag.infra.atomic import atomic_write_parquet, atomic_write_text
from saturated_dag.methods import label
from saturated_dag.schemas import schema
from saturated_dag.scorers import oracle as known


@dataclass
class TestbedResult:
    rows: pl.DataFrame          # one per (method, scorer): Δ pass@1 with its interval
    selection: pl.DataFrame     # each method's recipe configurations with validation pass@1
    cells: pl.DataFrame         # per eval cell: base pass@1, best style, headroom, Δ
    styles: pl.DataFrame        # per row, cell and style: share and accuracy
    verdicts: dict[str, Any]
    facts: dict[str, Any]


def _matrix(report: pl.DataFrame, questions: list[str]) -> np.ndarray:
    """An eval report (samples) as pass@1 per (data seed x) training seed x question, as the
    tables read it (``statistics.seed_matrix``)."""
    from saturated_dag.evaluation.reports import per_question_results

    part = report.filter(pl.col("question_id").is_in(questions))
    return seed_matrix(per_question_results(part), 1, questions)


SFT_CONTROLS = {"oracle": "SFT positive control (the oracle's best completion)",
                "random": "SFT reference (a random correct completion)"}
"""SFT's two controls, trained as RAFT (SFT on a scorer's best completion per question): the
oracle's best, and a random correct completion. Their contrast separates "the ranking
taught SFT something" from "any selection of correct completions helps"."""


ROLES = {**dict.fromkeys(known.DIAL, "dial"), "oracle": "positive control",
         known.SHUFFLED: "negative control", "random": "random scorer"}


def role_of(method: str, scorer: str) -> str:
    """The row's part in the testbed; every method's controls are named alike, and the
    ``method`` column says whose they are."""
    if method in ("sft", "raft"):
        return "SFT (not a null)" if method == "sft" else SFT_CONTROLS.get(scorer, "RAFT")
    return ROLES.get(scorer, "real scorer")


def _spearman(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import spearmanr

    return None if len(x) < 3 or len(set(y)) < 2 else float(spearmanr(x, y).statistic)


ROW_SCHEMA = schema("testbed_validation")


HARD_ROLES = {"random": "hard-split positive control (random correct-vs-incorrect pairs)",
              HARD_PAIRS_SHUFFLED: "hard-split negative control (the same pairs, half swapped)"}
"""The hard split's known-signal control (``training.hard_pair_control``): DPO on its
correct-vs-incorrect pairs drawn at random, against the same pairs with chosen and rejected
swapped on half the questions. Read on every eval question, as the findings it licenses are."""


def _row(method: str, scorer: str, role: str, recipe: str, rho: float | None,
         target: float | None, matrix: np.ndarray, delta: Interval) -> dict[str, Any]:
    return {"method": label(method), "scorer": scorer, "role": role, "recipe": recipe,
            "target ρ": target, "ρ with oracle": rho,
            "replicates": delta.replicates, "data seeds": delta.data_seeds,
            "questions": delta.questions,
            "pass@1": 100 * float(matrix.mean()), "Δ pass@1": delta.estimate,
            "Δ low": delta.low, "Δ high": delta.high, "p": delta.p,
            "detectable effect": delta.detectable()}


def _hard_rows(base: pl.DataFrame, hard: dict[str, pl.DataFrame]
               ) -> tuple[list[dict[str, Any]], dict[str, Interval]]:
    """The hard split's DPO cells (``HARD_ROLES``, by pick) as table rows, each against the
    base model on every eval question, and their intervals by pick, with the random pairs'
    paired Δ to the shuffled ones as ``contrast`` when both ran."""
    if not hard:
        return [], {}
    everything = sorted(base["question_id"].unique())
    base_all = _matrix(base, everything)
    rows, intervals = [], {}
    for pick, report in hard.items():
        matrix = _matrix(report, everything)
        delta = paired_delta(matrix, base_all).scaled(100)
        intervals[pick] = delta
        rows.append(_row("dpo", f"{pick} pairs (hard)", HARD_ROLES[pick], "", None, None,
                         matrix, delta))
    if set(hard) == set(HARD_ROLES):
        intervals["contrast"] = paired_delta(
            *(_matrix(hard[pick], everything) for pick in HARD_ROLES)).scaled(100)
    return rows, intervals


def analyse(s: TestbedSettings, base: pl.DataFrame,
            evals: dict[tuple[str, str], pl.DataFrame], recipes: dict[tuple[str, str], str],
            agreement: dict[str, float], selection: pl.DataFrame,
            facts: dict[str, Any],
            hard: dict[str, pl.DataFrame] | None = None) -> TestbedResult:
    """Each row's paired Δ pass@1 on the cells that can show a style effect, the controls'
    verdicts and the dose-response, from each cell's eval report (``evals``: its samples,
    by (method, scorer); SFT's scorer is ``sft``) and the base model's (``base``). ``hard``:
    the hard split's DPO cells on random and on shuffled pairs (``HARD_ROLES``), whose
    contrast is DPO's known-signal control there; None when the run trains neither."""
    cells = known.style_spread(base, s.positive_min_effect)
    usable = styled_cells(cells, "eval")
    questions = sorted(base.filter(pl.col("cell").is_in(usable))["question_id"].unique())
    base_m = _matrix(base, questions)
    rows, intervals = [], {}
    for (method, scorer), report in evals.items():
        matrix = _matrix(report, questions)
        delta = paired_delta(matrix, base_m).scaled(100)
        intervals[(method, scorer)] = delta
        rows.append(_row(method, scorer, role_of(method, scorer),
                         recipes.get((method, scorer), ""),
                         agreement.get(scorer) if method != "sft" else None,
                         known.DIAL.get(scorer) if method in ("rrhf", "dpo") else None,
                         matrix, delta))
    hard_rows, hard_intervals = _hard_rows(base, hard or {})
    rows += hard_rows
    table = pl.DataFrame(rows, schema=ROW_SCHEMA).sort("method", "role", "scorer")
    contrast = (paired_delta(*(_matrix(evals[("raft", sc)], questions)
                               for sc in ("oracle", "random"))).scaled(100)
                if ("raft", "oracle") in evals and ("raft", "random") in evals else None)
    verdicts = _verdicts(s, intervals, contrast, hard_intervals)
    per_point = _cell_deltas(base, evals.get(("rrhf", "oracle")), cells)
    samples = {f"{label(m)} · {sc}": report for (m, sc), report in evals.items()}
    from saturated_dag.analysis.behaviour import style_table
    from saturated_dag.tasks.solution_styles import detect_style

    styles = style_table(base, samples, detect_style)
    facts = {**facts, "cells used": usable, "base pass@1 (cells used)": 100 * base_m.mean()}
    return TestbedResult(table, selection, per_point, styles, verdicts, facts)


def _cell_deltas(base: pl.DataFrame, report: pl.DataFrame | None, cells: pl.DataFrame
                 ) -> pl.DataFrame:
    """The positive control's Δ pass@1 per cell, beside the cell's style facts."""
    out = []
    for cell in cells["cell"].to_list() if report is not None else []:
        qs = sorted(base.filter(pl.col("cell") == cell)["question_id"].unique())
        d = paired_delta(_matrix(report, qs), _matrix(base, qs)).scaled(100)
        out.append({"cell": cell, "positive control Δ pass@1": d.estimate,
                    "Δ low": d.low, "Δ high": d.high})
    frame = pl.DataFrame(out) if out else pl.DataFrame({"cell": cells["cell"]})
    return cells.join(frame, on="cell", how="left")


def styled_cells(spread: pl.DataFrame, what: str) -> list[str]:
    """The cells of a ``scorers.oracle.style_spread`` table whose styles differ enough to show
    a style effect, where a planted signal is read; none is refused (``what``: the question
    set, eval or validation)."""
    usable = spread.filter(pl.col("shows_style_effect"))["cell"].to_list()
    if not usable:
        raise ValueError(f"testbed: no {what} cell has styles that differ enough in accuracy "
                         "(testbed.positive_min_effect); nothing could show an effect")
    return usable


def effect_passes(delta: Interval, minimum: float) -> bool:
    """An effect's rule, shared by every positive control: Δ ≥ ``minimum`` points with the
    95% interval above 0."""
    return delta.estimate >= minimum and delta.low > 0


def training_size(partitions: pl.DataFrame, split: str) -> int:
    """The questions of ``split`` a method can train on, from one draw's difficulty
    partitions: every question of a saturated split; of the hard split, those with a correct
    completion (p-hat > 0: the ones its correctness pairs, SFT set and σ-RRHF groups come
    from)."""
    rows = partitions.filter(pl.col("split") == split)
    return rows.filter(pl.col("p_hat") > 0).height if split == "hard" else rows.height


def check_training_sizes(settings: TestbedSettings, draws: Mapping[int, pl.DataFrame]) -> None:
    """Refuse a run whose data seed has fewer training questions in a guarded split than
    ``testbed.min_training_questions`` asks (``draws``: each data seed's difficulty
    partitions; ``training_size``): its positive controls could not move the model, so every
    null would be unreadable for a reason the run itself does not show."""
    for split, minimum in settings.minimums().items():
        for draw, frame in sorted(draws.items()):
            count = training_size(frame, split)
            if count < minimum:
                what = "questions with a correct completion" if split == "hard" else "questions"
                raise ValueError(
                    f"testbed: the {split} split of data seed {draw} has {count} training "
                    f"{what}, fewer than testbed.min_training_questions ({minimum}); "
                    "raise chain_sum.questions_per_cell (strict_questions_per_cell for "
                    "strict_saturated)")


POSITIVE, NEGATIVE = "positive control", "negative control"


def _effect_verdict(delta: Interval, minimum: float, what: str) -> dict[str, Any]:
    return {"Δ": delta.estimate, "low": delta.low, "high": delta.high,
            "passed": effect_passes(delta, minimum),
            "rule": f"{what}: Δ ≥ {minimum:g} points and the 95% interval above 0"}


def _null_verdict(delta: Interval, band: float, what: str) -> dict[str, Any]:
    return {"Δ": delta.estimate, "low": delta.low, "high": delta.high,
            "passed": delta.low <= 0 <= delta.high and -band <= delta.low <= delta.high <= band,
            "rule": f"{what}: the 95% interval contains 0 and lies within ±{band:g} points"}


HARD = "DPO, hard split"
"""The hard split's DPO controls are named ``positive control (DPO, hard split)`` and
``negative control (DPO, hard split)``; ``controls`` keys the positive one ``hard/dpo``."""


def _verdicts(s: TestbedSettings, intervals: dict[tuple[str, str], Interval],
              sft_contrast: Interval | None = None,
              hard: dict[str, Interval] | None = None) -> dict[str, Any]:
    """Each method's controls, read off its own rows only (a control of σ-RRHF says nothing
    about DPO); SFT's is the oracle's best against a random correct one (``sft_contrast``);
    the hard split's DPO is read against its own known signal, correctness (``hard``: random
    pairs and shuffled pairs against the base model, and their ``contrast``)."""
    out: dict[str, Any] = {}
    minimum = {"rrhf": s.positive_min_effect, "dpo": s.dpo_min_effect}
    for method in ("rrhf", "dpo"):
        name = label(method)
        positive = intervals.get((method, "oracle"))
        if positive is not None:
            out[f"{POSITIVE} ({name})"] = _effect_verdict(
                positive, minimum[method], f"{name} with the oracle against the base model")
        negative = intervals.get((method, known.SHUFFLED))
        if negative is not None:
            out[f"{NEGATIVE} ({name})"] = _null_verdict(
                negative, s.null_band, f"{name} with shuffled oracle scores")
        points = [(known.DIAL[sc], intervals[(method, sc)].estimate)
                  for sc in known.DIAL if (method, sc) in intervals]
        if len(points) >= 3:
            rho = _spearman([p[0] for p in points], [p[1] for p in points])
            out[f"dose-response ({name})"] = {
                "points": len(points), "spearman": rho,
                "passed": rho is not None and rho >= 0.8,
                "rule": "Spearman of Δ against the dial's ρ at least 0.8"}
    if sft_contrast is not None:
        out[f"{POSITIVE} (SFT)"] = _effect_verdict(
            sft_contrast, s.sft_min_effect,
            "SFT on the oracle's best completion against SFT on a random correct one")
    hard = hard or {}
    if "contrast" in hard:
        out[f"{POSITIVE} ({HARD})"] = _effect_verdict(
            hard["contrast"], s.hard_min_effect,
            "DPO on the hard split's random correct-vs-incorrect pairs against the same "
            "pairs with half of them swapped")
    if HARD_PAIRS_SHUFFLED in hard:
        out[f"{NEGATIVE} ({HARD})"] = _null_verdict(
            hard[HARD_PAIRS_SHUFFLED], s.null_band,
            "DPO on the hard split's pairs with half of them swapped, against the base model")
    found = controls(out)
    passed = [key for key, c in found.items() if c.passed]
    out["smallest detectable effect"] = {
        "passed by method": {key: c.passed for key, c in found.items()},
        "reading": (f"a null of {', '.join(dict.fromkeys(subject(k) for k in passed))} "
                    "elsewhere in this run reads 'no effect larger than its detectable "
                    "effect'; a null of any other method is unreadable" if passed else
                    "no method's positive control passed: no null of this run can be read")}
    return out


CONTROLLED = {"rrhf": "rrhf", "dpo": "dpo", "sft": "sft", "raft": "sft"}
"""Method -> the method whose positive control licenses its nulls (RAFT is SFT on one
completion per question: SFT's control is trained as RAFT, so it covers both)."""


def controls(verdicts: dict[str, Any]) -> dict[str, Control]:
    """Each method's positive control from the testbed's verdicts (``findings.null_reading``
    reads a method's null only beside its own passing control), keyed by method, and the
    hard split's DPO control keyed ``hard/dpo`` (``findings.control_key``)."""
    out: dict[str, Control] = {}
    for method, owner in CONTROLLED.items():
        name = label(owner)
        verdict = verdicts.get(f"{POSITIVE} ({name})")
        if verdict is not None:
            what = "the oracle's best against a random correct" if owner == "sft" else "oracle"
            out[method] = Control(method, f"{name} positive control ({what})",
                                  bool(verdict["passed"]), measured(verdict))
    verdict = verdicts.get(f"{POSITIVE} ({HARD})")
    if verdict is not None:
        out["hard/dpo"] = Control("dpo", "DPO known-signal control on the hard split (random "
                                  "pairs against half-swapped pairs)", bool(verdict["passed"]),
                                  measured(verdict))
    return out


def measured(verdict: dict[str, Any]) -> str:
    """A control's finding against its bar, for a reading it licenses or not: ``Δ +2.66
    [-0.10, +5.29]; needs Δ ≥ 8 points and the 95% interval above 0``."""
    if "Δ" not in verdict:
        return ""
    found = f"Δ {verdict['Δ']:+.2f} [{verdict['low']:+.2f}, {verdict['high']:+.2f}]"
    rule = str(verdict.get("rule", ""))
    return f"{found}; needs {rule.split(': ', 1)[-1]}" if rule else found


VERDICTS_FILE = "testbed_verdicts.json"
"""The analysis' verdicts, beside its tables in ``<output>/chain_sum/``."""


def unvalidated_note(verdicts: dict[str, Any], shown: set[str]) -> str:
    """A caption's sentence for each method among ``shown`` (labels, ``DPO``) whose positive
    control failed in the testbed of the same run; "" when none."""
    failed = sorted(subject(key) for key, c in controls(verdicts).items()
                    if not c.passed and label(c.method) in shown)
    return "".join(f" {name} is unvalidated in the embedded world: its positive control "
                   "failed in this run's testbed (its graph's testbed_validation asset), so a null "
                   "of its rows cannot be read as no effect." for name in failed)


def headline(result: TestbedResult) -> str:
    """One clause per verdict: what the testbed found, with its numbers (each control's Δ
    pass@1 and 95% interval). Short enough to be a page's first screen; the rule each
    verdict applies is in ``rules``."""
    parts = []
    for name, r in result.verdicts.items():
        verdict = "passed" if r.get("passed") else "FAILED"
        if name.startswith((POSITIVE, NEGATIVE)):
            parts.append(f"{name} {verdict}: Δ pass@1 {r['Δ']:+.2f} "
                         f"[{r['low']:+.2f}, {r['high']:+.2f}]")
        elif name.startswith("dose-response"):
            rho = "n/a" if r["spearman"] is None else f"{r['spearman']:+.2f}"
            parts.append(f"{name} {verdict}: Spearman {rho} over {r['points']} dial points")
    return "; ".join(parts) + "."


def rules(result: TestbedResult) -> str:
    """The rule each control's verdict applies (``headline`` gives the verdicts)."""
    return "; ".join(f"{name}: {r['rule']}" for name, r in result.verdicts.items()
                     if name.startswith((POSITIVE, NEGATIVE)) and r.get("rule")) + "."


def write_outputs(result: TestbedResult, folder: Path) -> dict[str, Path]:
    """The tables as Parquet and CSV, the verdicts as JSON, the dose-response figure."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in ("rows", "selection", "cells", "styles"):
        frame = getattr(result, name)
        paths[name] = atomic_write_parquet(frame, folder / f"testbed_{name}.parquet")
    paths["verdicts"] = atomic_write_text(folder / VERDICTS_FILE, json.dumps(
        {"verdicts": result.verdicts, "facts": result.facts}, indent=1, default=str))
    paths["figure"] = dose_response_figure(result.rows, folder / "testbed_dose_response.png")
    return paths


def dose_response_figure(rows: pl.DataFrame, path: Path) -> Path:
    """Δ pass@1 (95% interval) against each scorer's measured agreement with the oracle: the
    dial as lines per method, the controls and real scorers as labelled points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.infra.atomic import atomic_save_figure

    fig, ax = plt.subplots(figsize=(7.2, 5), dpi=150)
    ax.axhline(0, color="grey", lw=0.8)
    colours = {"σ-RRHF": "tab:blue", "DPO": "tab:orange", "SFT": "tab:green"}
    for method, colour in colours.items():
        part = rows.filter((pl.col("method") == method) & pl.col("ρ with oracle").is_not_null())
        if part.is_empty():
            continue
        dial = part.filter(pl.col("target ρ").is_not_null()).sort("ρ with oracle")
        x, y = dial["ρ with oracle"].to_numpy(), dial["Δ pass@1"].to_numpy()
        err = [y - dial["Δ low"].to_numpy(), dial["Δ high"].to_numpy() - y]
        ax.errorbar(x, y, yerr=err, fmt="-o", color=colour, capsize=3,
                    label=f"{method}: the dial")
        other = part.filter(pl.col("target ρ").is_null())
        for row in other.iter_rows(named=True):
            yv = row["Δ pass@1"]
            ax.errorbar([row["ρ with oracle"]], [yv],
                        yerr=[[yv - row["Δ low"]], [row["Δ high"] - yv]], fmt="s",
                        color=colour, capsize=3, mfc="white")
            ax.annotate(row["scorer"], (row["ρ with oracle"], yv), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
    ax.plot([], [], "s", color="grey", mfc="white", label="controls and real scorers (labelled)")
    ax.set_xlabel("within-question Spearman ρ with the oracle (measured)")
    ax.set_ylabel("Δ pass@1 to the base model (points, 95% interval)")
    ax.set_title("Testbed: how reliable must a signal beyond correctness be to help?")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)
    return path
