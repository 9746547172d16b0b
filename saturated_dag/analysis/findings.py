"""The paper's findings, checked one by one against a run's eval reports (docs/study.md).

Each finding is a comparison of two rows (or a row and the base model) on the same eval
questions: the paired Δ with its bootstrap interval (``statistics.paired_delta``: each row's
data seeds, the training seeds of each data seed, and the questions; ``sample_text`` says
how many). The verdict is read off the interval and nothing else: *holds* when the interval
lies on the paper's side of 0 (or, for a claim of "no effect", inside ±``NEGLIGIBLE`` points),
*does not hold* when it lies on the other side (or, for "no effect", entirely outside
±``NEGLIGIBLE``), *inconclusive* otherwise.

The findings are read together, so each also has the p-value of its claim from the same
bootstrap draws (below 0.05 about when the verdict is *holds*) and Holm's family-wise
adjustment over every finding the run produced (``compare_all``, ``docs/statistics.md``): a
finding that *holds* but not after Holm is one a reader of 18 claims at 95% each should expect
by chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from saturated_dag.evaluation.statistics import (
    LEVEL,
    Interval,
    bootstrap_mean,
    delta_interval,
    holm,
    paired_delta_draws,
    seed_matrix,
    share_beyond,
)
from saturated_dag.methods import METHODS, label

NEGLIGIBLE = 3.0
"""Points of pass@k within which a difference counts as negligible (the study's target)."""

Claim = Literal["greater", "less", "negligible"]
HOLDS, FAILS, OPEN = "holds", "does not hold", "inconclusive"


@dataclass(frozen=True)
class Comparison:
    """``row`` against ``reference`` on pass@``k``; the paper says the Δ is ``claim``."""

    finding: str
    paper: str
    row: str
    reference: str
    claim: Claim
    k: int = 1


@dataclass(frozen=True)
class Result:
    comparison: Comparison
    delta: Interval | None  # None: a row the run did not produce
    verdict: str
    p: float | None = None  # the claim's bootstrap p-value (``claim_p``)
    holm_p: float | None = None  # Holm's adjustment over the findings (``compare_all``)

    @property
    def holds_after_holm(self) -> bool:
        return (self.verdict == HOLDS and self.holm_p is not None
                and self.holm_p < 1 - LEVEL)


def verdict(delta: Interval, claim: Claim) -> str:
    if claim == "greater":
        return HOLDS if delta.low > 0 else FAILS if delta.high < 0 else OPEN
    if claim == "less":
        return HOLDS if delta.high < 0 else FAILS if delta.low > 0 else OPEN
    if -NEGLIGIBLE < delta.low and delta.high < NEGLIGIBLE:
        return HOLDS
    return FAILS if delta.low >= NEGLIGIBLE or delta.high <= -NEGLIGIBLE else OPEN


def claim_p(draws: np.ndarray, claim: Claim) -> float:
    """The p-value of the claim's null from the paired bootstrap draws (points), two-sided as
    the 95% interval is, so p < 0.05 about when the verdict is *holds*: for "greater", twice
    the share of draws ≤ 0; for "less", twice the share ≥ 0; for "negligible" (two one-sided
    tests against ±``NEGLIGIBLE``), twice the larger share beyond either bound."""
    if claim == "greater":
        share = share_beyond(draws, 0.0, "below")
    elif claim == "less":
        share = share_beyond(draws, 0.0, "above")
    else:
        share = max(share_beyond(draws, -NEGLIGIBLE, "below"),
                    share_beyond(draws, NEGLIGIBLE, "above"))
    return min(1.0, 2 * share)


def compare(reports: Mapping[str, pl.DataFrame], comparison: Comparison) -> Result:
    """The comparison's paired Δ (points), verdict and claim p-value; rows are per-question
    eval results (``evaluation.per_question_results``) keyed by name, ``base`` the base
    model's."""
    if comparison.row not in reports or comparison.reference not in reports:
        return Result(comparison, None, "not run")
    reference = reports[comparison.reference]
    order = sorted(reference["question_id"].unique().to_list())
    run = seed_matrix(reports[comparison.row], comparison.k, order)
    base = seed_matrix(reference, comparison.k, order)
    found = paired_delta_draws(run, base)
    delta = delta_interval(found.estimate, found.draws, found.replicates, found.questions,
                           data_seeds=found.data_seeds).scaled(100)
    return Result(comparison, delta, verdict(delta, comparison.claim),
                  claim_p(100 * found.draws, comparison.claim))


def by_draw(reports: Mapping[str, pl.DataFrame], comparison: Comparison) -> list[Result]:
    """The comparison on each data seed alone (rows trained on several data seeds,
    ``Profile.data_seeds``): does the finding hold on every draw of the training data, or on
    one only? Each draw's rows are its own adapters, against the same reference (the base
    model has no draw). Empty when the row has one data seed or was not run."""
    row = reports.get(comparison.row)
    if row is None or "data_seed" not in row.columns or row["data_seed"].n_unique() < 2:
        return []
    out = []
    for draw in sorted(row["data_seed"].unique().to_list()):
        own = {name: frame.filter(pl.col("data_seed") == draw)
               if name != "base" and "data_seed" in frame.columns
               and frame["data_seed"].n_unique() > 1 else frame
               for name, frame in reports.items()
               if name in (comparison.row, comparison.reference)}
        out.append(compare(own, comparison))
    return out


def across_draws(results: Sequence[Result]) -> str:
    """Whether a finding holds across the data draws, in words, from ``by_draw``'s results:
    each draw's verdict, and "holds on every draw" only when it holds on each."""
    if not results:
        return ""
    verdicts = [r.verdict for r in results]
    shown = "; ".join(f"data seed {i}: {v}" + (
        "" if r.delta is None else f" ({r.delta.estimate:+.2f})")
        for i, (v, r) in enumerate(zip(verdicts, results, strict=True)))
    if all(v == "holds" for v in verdicts):
        return f"holds on every draw ({shown})"
    if len(set(verdicts)) == 1:
        return f"{verdicts[0]} on every draw ({shown})"
    return f"differs between draws ({shown})"


def cell_digits(cell: str) -> int | None:
    """The digits of a chain-sum eval cell's name (``3x2`` -> 2); None for another task's."""
    terms, sep, digits = cell.partition("x")
    return int(digits) if sep and terms.isdigit() and digits.isdigit() else None


def by_digits(reports: Mapping[str, pl.DataFrame], comparison: Comparison
              ) -> list[tuple[int, Result]]:
    """The comparison on the eval questions of each operand size alone (chain sum's ``cell``
    column, ``<terms>x<digits>``), ascending: the transfer view, the Δ on the cells like the
    saturated training questions (one digit in the embedded study) beside the Δ on the
    harder ones (two digits). Empty when the rows were not run or the eval set has no chain-sum
    cells (GSM8K)."""
    row, reference = reports.get(comparison.row), reports.get(comparison.reference)
    if row is None or reference is None or "cell" not in reference.columns:
        return []
    digits = sorted({d for d in map(cell_digits, reference["cell"].unique().to_list())
                     if d is not None})
    out = []
    for size in digits:
        cells = [c for c in reference["cell"].unique().to_list() if cell_digits(c) == size]
        own = {name: frame.filter(pl.col("cell").is_in(cells))
               for name, frame in ((comparison.row, row), (comparison.reference, reference))}
        out.append((size, compare(own, comparison)))
    return out


def transfer_text(results: Sequence[tuple[int, Result]]) -> str:
    """``by_digits``'s results in words: each operand size's Δ with its 95% interval."""
    return "; ".join(
        f"{size} digit{'s' if size > 1 else ''}: " + (
            "not run" if r.delta is None else
            f"{r.delta.estimate:+.2f} [{r.delta.low:+.2f}, {r.delta.high:+.2f}]")
        for size, r in results)


def compare_all(reports: Mapping[str, pl.DataFrame],
                comparisons: Sequence[Comparison]) -> list[Result]:
    """Every comparison, with Holm's adjustment of its claim p-value over the family of those
    the run produced (a row not run is not a test)."""
    results = [compare(reports, c) for c in comparisons]
    adjusted = holm([r.p for r in results])
    return [Result(r.comparison, r.delta, r.verdict, r.p, a)
            for r, a in zip(results, adjusted, strict=True)]


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def sample_text(results: Sequence[Result]) -> str:
    """What the findings' intervals rest on, for their caption: the compared rows' data seeds
    × training seeds and the questions, with their counts; when every row has one data seed,
    that the data's draw is not in the intervals (a redraw of the training data can move a Δ
    by points; docs/statistics.md). Empty when no finding was run."""
    run = [r.delta for r in results if r.delta is not None]
    if not run:
        return ""
    data = [d.data_seeds for d in run]
    seeds = _span([d.replicates for d in run])
    questions = _span([d.questions for d in run])
    if max(data) > 1:
        return (f"95% intervals over the {_span(data)} data seeds × {seeds} training seed(s) of "
                f"each row and the {questions} eval questions.")
    return (f"95% intervals over each row's {seeds} training seed(s) and the {questions} eval "
            "questions; the data's draw is not in them: each row was trained on one data "
            "seed (one draw of the training questions and of the completions sampled).")


@dataclass(frozen=True)
class Control:
    """One method's positive control in the run the findings come from (the testbed's
    ``controls``): the planted signal trained with that method, and whether it was found."""

    method: str
    name: str  # e.g. "σ-RRHF positive control (oracle)"
    passed: bool
    measured: str = ""  # what it found against its bar: "Δ +2.66 [-0.10, +5.29]; needs ..."


def row_method(row: str) -> str | None:
    """The training method of a findings row (``<split>/<cell>``, as the eval reports are
    named); None for ``base``. Read off the cell's name, which starts with its method
    (``experiments.Experiment.name``)."""
    if row == "base":
        return None
    cell = row.split("/", 1)[-1]
    for name in sorted(METHODS, key=len, reverse=True):
        if cell == name or cell.startswith(f"{name}_"):
            return name
    raise ValueError(f"findings row {row!r}: its cell does not start with a known method "
                     f"({', '.join(METHODS)})")


OWN_CONTROL = frozenset({"hard/dpo"})
"""``<split>/<method>`` pairs whose rows answer to a control of their own rather than their
method's: the hard split's DPO learns from correct-vs-incorrect pairs, so its control is
that signal (``training.hard_pair_control``), not the oracle's style preference."""


def control_key(row: str) -> str | None:
    """The key of the control that licenses a findings row's null (``controls`` are keyed
    by method, or ``<split>/<method>`` for ``OWN_CONTROL``); None for ``base``."""
    method = row_method(row)
    if method is None:
        return None
    own = f"{row.split('/', 1)[0]}/{method}"
    return own if own in OWN_CONTROL else method


def subject(key: str) -> str:
    """A control key as a reader names it: ``DPO``, or ``DPO on the hard split``."""
    split, _, method = key.rpartition("/")
    return label(method) + (f" on the {split} split" if split else "")


def _swapped(row: str, reference: str, pair: frozenset[str]) -> bool:
    """Whether ``row`` and ``reference`` are one cell with the two scorers of ``pair``
    exchanged (``saturated/dpo_self_judge`` against ``saturated/dpo_strong_judge``)."""
    a, b = sorted(pair)
    return (row.replace(a, b) == reference.replace(a, b) and row != reference
            and (a in row or a in reference) and (b in row or b in reference))


def null_reading(result: Result, controls: Mapping[str, Control] | None,
                 copies: Sequence[frozenset[str]] = ()) -> str:
    """How a result that is not a positive finding may be read.

    "no effect larger than X points" (X the far edge of its 95% interval) only when *every*
    method the comparison involves has a passing positive control of its own in the same run
    (``controls``, by ``control_key``: the method's, or the hard split's own for its DPO rows;
    None when the run had no testbed): a control of σ-RRHF says nothing about DPO. A contrast
    of two scorers that are copies of each other (``copies``: pairs of scorer names, such as
    the embedded world's self-judge and rubric) reads "unreadable: identical by
    construction", whatever its interval. A finding that holds reads
    as itself, unless what it claims is itself a null ("negligible": no difference beyond
    ±``NEGLIGIBLE``): that one is read against the controls like any other null."""
    comparison = result.comparison
    if result.delta is not None and any(_swapped(comparison.row, comparison.reference, pair)
                                        for pair in copies):
        return "unreadable: identical by construction (the two scorers are copies)"
    if result.delta is None or (result.verdict == HOLDS
                                and comparison.claim != "negligible"):
        return ""
    if controls is None:
        return "unreadable: this run has no testbed"
    involved = [k for k in (control_key(comparison.row), control_key(comparison.reference))
                if k is not None]
    for key in dict.fromkeys(involved):
        control = controls.get(key)
        if control is None:
            return f"unreadable: no positive control of {subject(key)} in this run"
        if not control.passed:
            why = f" ({control.measured})" if control.measured else ""
            return f"unreadable: {control.name} did not pass{why}"
    bound = max(abs(result.delta.low), abs(result.delta.high))
    return f"no effect larger than {bound:.1f} points"


def licence(result: Result, controls: Mapping[str, Control] | None) -> str:
    """The controls a reading rests on, with their verdicts: one per method the comparison
    involves, by ``control_key`` (the findings table's "control" column)."""
    comparison = result.comparison
    keys = dict.fromkeys(k for k in (control_key(comparison.row),
                                     control_key(comparison.reference)) if k is not None)
    if controls is None:
        return "none (no testbed in this run)"
    parts = []
    for key in keys:
        control = controls.get(key)
        parts.append(f"none for {subject(key)}" if control is None else
                     f"{control.name}: {'passed' if control.passed else 'FAILED'}")
    return "; ".join(parts)


QUALITY = ("self_judge", "strong_judge", "entropy")


def paper_comparisons() -> list[Comparison]:
    """The paper's findings the study tests, as the paper states them (section or table)."""
    out = []
    for scorer in QUALITY:
        out += [
            Comparison("σ-RRHF on saturated questions beats the base model", "Table 1",
                       f"saturated/rrhf_{scorer}", "base", "greater"),
            Comparison("σ-RRHF on saturated questions beats SFT", "Table 1",
                       f"saturated/rrhf_{scorer}", "saturated/sft", "greater"),
            Comparison("σ-RRHF on the strictly easier split transfers to D", "Table 1",
                       f"strict_saturated/rrhf_{scorer}", "base", "greater"),
        ]
    out += [
        Comparison("hard split: σ-RRHF gives the largest pass@1 gain over SFT (+9.6)",
                   "Table 7", "hard/rrhf_self_judge", "hard/sft", "greater"),
        Comparison("hard split: DPO (correctness pairs) beats SFT on pass@1 (+4.8)",
                   "Table 7", "hard/dpo_correctness_self_judge", "hard/sft", "greater"),
        Comparison("hard split: DPO trails SFT on pass@8 (−11)", "Table 7",
                   "hard/dpo_correctness_self_judge", "hard/sft", "less", k=8),
        Comparison("hard split: self-judge pairs beat random pairs (+5.4 pass@1)", "Table 7",
                   "hard/dpo_correctness_self_judge", "hard/dpo_correctness_random",
                   "greater"),
        Comparison("removing σ-RRHF's SFT term is catastrophic", "Table 8",
                   "hard/rrhf_self_judge_no_sft", "hard/rrhf_self_judge", "less"),
        Comparison("removing the hinge costs about 3 points", "Table 8",
                   "hard/rrhf_self_judge_no_hinge", "hard/rrhf_self_judge", "less"),
        Comparison("removing the logistic weight has negligible effect", "Table 8",
                   "hard/rrhf_self_judge_no_logistic", "hard/rrhf_self_judge", "negligible"),
        Comparison("the rank loss adds at most marginally (λ=0.1 against λ=0)", "Figure 6",
                   "hard/rrhf_self_judge", "hard/rrhf_self_judge_lambda0", "negligible"),
        Comparison("λ ≥ 0.5 hurts (λ=1 against λ=0)", "Figure 6",
                   "hard/rrhf_self_judge_lambda1", "hard/rrhf_self_judge_lambda0", "less"),
    ]
    return out


AGREEMENT_PAIRS: tuple[tuple[str, str, float | None], ...] = (
    ("self_judge", "strong_judge", 0.15), ("entropy", "strong_judge", 0.44),
    ("entropy", "self_judge", 0.16))
"""Table 10 (chain sum, D'): the paper's mean within-question Spearman ρ per scorer pair."""
ORACLE_PAIRS: tuple[tuple[str, str, float | None], ...] = (
    ("self_judge", "oracle", None), ("strong_judge", "oracle", None))
"""Each judge against the embedded world's oracle (``scorers.oracle``): how much of the
planted signal it sees. The paper has no oracle, so no paper value."""


@dataclass(frozen=True)
class Agreement:
    pair: tuple[str, str]
    paper: float | None
    mean: Interval | None
    questions: int


def agreement(per_question: pl.DataFrame, split: str = "strict_saturated",
              pairs: Sequence[tuple[str, str, float | None]] = AGREEMENT_PAIRS
              ) -> list[Agreement]:
    """Mean within-question ρ per scorer pair on ``split`` with its bootstrap interval over
    questions (``scorer_agreement`` rows whose ρ is defined)."""
    out = []
    rows = per_question.filter((pl.col("split") == split) & pl.col("rho").is_not_nan()
                               & pl.col("rho").is_not_null())
    for a, b, paper in pairs:
        values = rows.filter(((pl.col("scorer_a") == a) & (pl.col("scorer_b") == b))
                             | ((pl.col("scorer_a") == b) & (pl.col("scorer_b") == a)))["rho"]
        found = np.asarray(values.to_list(), dtype=float)
        interval = bootstrap_mean(found) if found.size else None
        out.append(Agreement((a, b), paper, interval, int(found.size)))
    return out


def agreement_rows(per_question: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """Per (split, scorer pair) of ``agreement.summarize``'s table, in its order: the
    questions with a defined ρ, the mean ρ with its 95% bootstrap interval over them, the
    median and the % with ρ > 0 (unrounded; null where no question had a defined ρ)."""
    rows = []
    defined = per_question.filter(pl.col("rho").is_not_null() & pl.col("rho").is_not_nan())
    for split, a, b in summary.select("split", "scorer_a", "scorer_b").iter_rows():
        pair = (((pl.col("scorer_a") == a) & (pl.col("scorer_b") == b))
                | ((pl.col("scorer_a") == b) & (pl.col("scorer_b") == a)))
        found = defined.filter((pl.col("split") == split) & pair)["rho"].to_numpy().astype(float)
        mean = bootstrap_mean(found) if found.size else None
        rows.append({"split": split, "scorers": f"{a} vs {b}", "questions": int(found.size),
                     "mean ρ": None if mean is None else mean.estimate,
                     "mean ρ low": None if mean is None else mean.low,
                     "mean ρ high": None if mean is None else mean.high,
                     "median ρ": float(np.median(found)) if found.size else None,
                     "% ρ > 0": float(100 * np.mean(found > 0)) if found.size else None})
    return pl.DataFrame(rows, schema={"split": pl.String, "scorers": pl.String,
                                      "questions": pl.Int64, "mean ρ": pl.Float64,
                                      "mean ρ low": pl.Float64, "mean ρ high": pl.Float64,
                                      "median ρ": pl.Float64, "% ρ > 0": pl.Float64})


def _rho(found: Agreement) -> str:
    if found.mean is None:
        return "n/a (no question with a defined ρ)"
    paper = "no paper value" if found.paper is None else f"paper {found.paper:.2f}"
    return (f"{found.mean.estimate:.2f} [{found.mean.low:.2f}, {found.mean.high:.2f}] "
            f"({paper}; {found.questions} questions)")


def agreement_summary(per_question: pl.DataFrame, split: str = "strict_saturated",
                      pairs: Sequence[tuple[str, str, float | None]] = AGREEMENT_PAIRS) -> str:
    """The scorer agreement's answer in Markdown: the paper's scorer pairs (Table 10) on
    ``split`` (the first split present when that one is not), each mean within-question ρ
    with its 95% bootstrap interval over questions beside the paper's value, and which pairs
    agree beyond chance (interval above 0)."""
    splits = per_question["split"].unique(maintain_order=True).to_list()
    if not splits:
        return "No question had scores from two scorers: nothing to compare."
    split = split if split in splits else splits[0]
    found = agreement(per_question, split, pairs)
    above = [" vs ".join(f.pair) for f in found if f.mean is not None and f.mean.low > 0]
    parts = "; ".join(f"{' vs '.join(f.pair)} {_rho(f)}" for f in found)
    return (f"**Mean within-question Spearman ρ on {split}, 95% bootstrap interval over "
            f"questions:** {parts}.\n\n"
            f"Above 0 beyond chance: {', '.join(above) or 'none'}. Every pair and split is in "
            "the table below (correct completions only).")
