"""The embedded study's report: ``<output dir>/study_report.md``, and with ``--results-doc``
the snapshot between docs/results.md's ``study-results`` markers.

``scripts/run_study.sh`` calls this after the ``study`` job (no ``--results-doc``: a run never
rewrites a tracked file); refreshing the snapshot is the explicit
``python scripts/study_report.py --results-doc`` (docs/results.md, or the file given after
it; ``--readme`` is its old name). Every number in the section is read
from that run's outputs (tables, eval reports, selections, scorer agreement), and each
of the paper's findings gets its paired Δ, 95% interval and verdict
(``saturated_dag.analysis.findings``, docs/study.md); its first line names the commit and machine
that produced them (``scripts/run_record.py``).

    python scripts/study_report.py [--output-dir outputs/study] [--results-doc [PATH]]
                                   [--wall-seconds S]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import polars as pl

from saturated_dag.infra.atomic import read_proven_parquet

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from run_record import describe  # noqa: E402  (a script beside this one)

START, END = "<!-- study-results:start -->", "<!-- study-results:end -->"
RESULTS_DOC = ROOT / "docs" / "results.md"  # the page that holds the snapshot
TASK = "chain_sum"
TABLES = (
    ("results_table", "Tables 1 and 7 (`study/chain_sum/results_table`)"),
    ("rank_weight_ablation", "Figure 6 (`study/chain_sum/rank_weight_ablation`)"),
    ("rrhf_variants", "Table 8 (`study/chain_sum/rrhf_variants`)"),
    ("dpo_beta_sweep", "Table 9 (`study/chain_sum/dpo_beta_sweep`)"),
)


def _read(path: Path) -> pl.DataFrame:
    """A table the run wrote, refused unless it hashes to the content hash it carries."""
    return read_proven_parquet(path, "re-run the study (bash scripts/run_study.sh), or "
                                     "re-materialise the asset that wrote it")


def _reports(assets: Path) -> dict[str, pl.DataFrame]:
    from saturated_dag.evaluation.reports import per_question_results

    reports = {"base": per_question_results(_read(assets / "eval" / "base.parquet"))}
    for path in sorted(assets.glob("*/eval/*.parquet")):
        reports[f"{path.parent.parent.name}/{path.stem}"] = per_question_results(
            _read(path))
    return reports


def _interval(i) -> str:
    return f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}]"


def findings_section(reports: dict[str, pl.DataFrame], agreement_rows: pl.DataFrame | None,
                     controls: dict | None = None, copies: bool = False) -> str:
    """The findings table; a null is read against the same run's positive control of every
    method it involves (``controls``, by method: ``testbed.controls``; None when the run had
    no testbed), and with ``copies`` a self-judge vs strong-judge contrast (and their
    agreement) is marked identical by construction."""
    from saturated_dag.analysis.findings import (
        AGREEMENT_PAIRS,
        NEGLIGIBLE,
        ORACLE_PAIRS,
        across_draws,
        agreement,
        by_digits,
        by_draw,
        compare_all,
        licence,
        null_reading,
        paper_comparisons,
        sample_text,
        transfer_text,
    )

    pairs = [frozenset({"self_judge", "strong_judge"})] if copies else []
    lines = ["| paper | finding | compared | Δ (points, 95% interval) | verdict | Holm p | "
             "holds after Holm | across the data draws | Δ by the eval questions' digits | "
             "reading | control |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    tally: dict[str, int] = {}
    results = compare_all(reports, paper_comparisons())
    for result in results:
        comparison = result.comparison
        tally[result.verdict] = tally.get(result.verdict, 0) + 1
        shown = "" if result.delta is None else _interval(result.delta)
        holm_p = "" if result.holm_p is None else f"{result.holm_p:.3f}"
        after = "" if result.delta is None else ("yes" if result.holds_after_holm else "no")
        lines.append(f"| {comparison.paper} | {comparison.finding} | `{comparison.row}` − "
                     f"`{comparison.reference}` (pass@{comparison.k}) | {shown} | "
                     f"**{result.verdict}** | {holm_p} | {after} | "
                     f"{across_draws(by_draw(reports, comparison)) or 'one data seed'} | "
                     f"{transfer_text(by_digits(reports, comparison))} | "
                     f"{null_reading(result, controls, pairs)} | "
                     f"{licence(result, controls)} |")
    summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(tally.items()))
    tested = sum(r.delta is not None for r in results)
    surviving = sum(r.holds_after_holm for r in results)
    parts = [f"Findings, point by point ({summary}). A finding *holds* when its interval lies "
             "on the paper's side of 0, *does not hold* when it lies on the other side, and "
             f"is *inconclusive* when it contains 0; \"negligible\" means inside ±{NEGLIGIBLE:g} "
             f"points. Read together, the {tested} findings are one family: Holm's correction "
             f"(docs/statistics.md) leaves {surviving} holding. {sample_text(results)} "
             "*Across the data draws*: the same comparison on each data seed's adapters alone. "
             "*By the eval questions' digits*: the same comparison on the eval cells of one "
             "operand size alone, the transfer the paper asks about (one digit: like the "
             "saturated training questions; two digits: harder).",
             "", *unvalidated(controls),
             *lines]
    if agreement_rows is not None:
        scorer_pairs = [*AGREEMENT_PAIRS, *ORACLE_PAIRS]
        for split, where in (("strict_saturated", "D_prime, the paper's Table 10"),
                             ("saturated", "the saturated split, the one the study trains on")):
            parts += ["", f"Scorer agreement on {where} (correct completions): mean "
                      "within-question Spearman ρ, 95% bootstrap interval over questions. "
                      "The paper has no oracle; the oracle rows say how much of the planted "
                      "signal each judge sees.", "",
                      "| scorers | ρ here | questions | paper (Qwen3, chain sum) | paper's "
                      "value inside the interval |", "|---|---|---|---|---|"]
            for row in agreement(agreement_rows, split, scorer_pairs):
                parts.append(_agreement_line(row, copies))
    return "\n".join(parts)


def _agreement_line(row, copies: bool) -> str:
    """One scorer pair's row of an agreement table."""
    from saturated_dag.scorers.judges import JUDGES_ARE_COPIES

    shown, inside = "", "not run"
    if row.mean is not None:
        shown = f"{row.mean.estimate:+.2f} [{row.mean.low:+.2f}, {row.mean.high:+.2f}]"
        if row.paper is None:
            inside = "no paper value"
        else:
            inside = "yes" if row.mean.low <= row.paper <= row.mean.high else (
                "no: higher here" if row.mean.low > row.paper else "no: lower here")
    if copies and set(row.pair) == {"self_judge", "strong_judge"}:
        inside += f"; {JUDGES_ARE_COPIES}"
    paper = "" if row.paper is None else f"{row.paper:+.2f}"
    return (f"| {row.pair[0]} vs {row.pair[1]} | {shown} | {row.questions} | {paper} | "
            f"{inside} |")


def unvalidated_rows(table: str, controls: dict | None) -> list[str]:
    """Below a table that shows a method whose positive control failed in this run: a line
    saying its rows are unvalidated in the embedded world (their nulls cannot be read)."""
    from saturated_dag.analysis.findings import subject
    from saturated_dag.methods import label

    failed = sorted((subject(key), label(c.method)) for key, c in (controls or {}).items()
                    if not c.passed)
    shown = [name for name, method in failed if f"| {method} " in table
             and f"{name} is unvalidated in the embedded world" not in table]
    return [f"*{name} is unvalidated in the embedded world* (its positive control failed in "
            "this run's testbed): its rows' intervals are measured, but a null of one "
            "cannot be read as \"no effect\"." for name in shown] + ([""] if shown else [])


def unvalidated(controls: dict | None) -> list[str]:
    """A line per method whose positive control did not pass in this run: it is unvalidated
    in the embedded world, and every finding that involves it reads "unreadable"."""
    from saturated_dag.analysis.findings import subject

    failed = sorted({subject(key) for key, c in (controls or {}).items() if not c.passed})
    return [f"**{name} is unvalidated in the embedded world:** its positive control did not "
            "pass in this run, so no null of a finding that involves it can be read." for name in
            failed] + ([""] if failed else [])


def selections_section(assets: Path) -> str:
    rows = []
    for path in sorted(assets.glob("*/selection/*.parquet")):
        table = _read(path)
        tried = ", ".join(f"{r['configuration']} {r['validation pass@1']:.1f}"
                         + (" (chosen)" if r["chosen"] else "")
                         for r in table.iter_rows(named=True))
        rows.append(f"| {path.parent.parent.name}/{path.stem} | {tried} |")
    if not rows:
        return ""
    return "\n".join(["Selection (App. B): validation pass@1 (%) of each configuration, mean "
                      "over its training seeds (`<split>/selection/<cell>`).", "",
                      "| cell | configurations |", "|---|---|", *rows])


def achieved(output_dir: Path) -> str:
    """What the study can detect, measured: the half-widths of the main table's Δ pass@1
    intervals (questions and training seeds resampled), against the 3-point target."""
    path = output_dir / "assets" / TASK / "results_table.parquet"  # the asset, with its proof
    if not path.is_file():
        return ""
    table = _read(path).filter(pl.col("split") != "-")
    half = ((table["Δ pass@1 high"] - table["Δ pass@1 low"]) / 2).sort()
    within = int((half <= 3.0).sum())
    return (f"Power, measured (docs/study.md): the main table's Δ pass@1 intervals are "
            f"±{half.median():.2f} points wide at the median and ±{half.max():.2f} at the "
            f"widest; {within} of {half.len()} rows resolve a 3-point difference "
            "(half-width at most 3 points).")


def testbed_section(output_dir: Path) -> tuple[dict | None, str]:
    """The same run's testbed (docs/testbed.md): each method's positive control
    (``testbed.controls``), and its verdicts and validation table as Markdown; (None, "") when
    the run had none."""
    import json

    from saturated_dag.analysis.testbed import controls

    path = output_dir / TASK / "testbed_verdicts.json"
    if not path.is_file():
        return None, ""
    verdicts = json.loads(path.read_text(encoding="utf-8"))["verdicts"]
    rows = _read(output_dir / TASK / "testbed_rows.parquet")
    lines = ["Testbed of this run (`study/chain_sum/testbed_validation`, docs/testbed.md): "
             + "; ".join(f"{name}: {'passed' if v['passed'] else 'FAILED'}"
                         + (f" (Δ {v['Δ']:+.2f} [{v['low']:+.2f}, {v['high']:+.2f}])"
                            if "Δ" in v else
                            f" (Spearman {v['spearman']:+.2f})" if v.get("spearman")
                            is not None else "")
                         for name, v in verdicts.items() if "passed" in v) + ".", "",
             "| role | method | scorer | ρ with oracle | Δ pass@1 [95% CI] | detectable effect |",
             "|---|---|---|---|---|---|"]
    for r in rows.iter_rows(named=True):
        rho = "" if r["ρ with oracle"] is None else f"{r['ρ with oracle']:+.2f}"
        lines.append(f"| {r['role']} | {r['method']} | {r['scorer']} | {rho} | "
                     f"{r['Δ pass@1']:+.2f} [{r['Δ low']:+.2f}, {r['Δ high']:+.2f}] | "
                     f"{r['detectable effect']:.2f} |")
    return controls(verdicts), "\n".join(lines)


def section(profile: object, output_dir: Path, wall_seconds: float | None) -> str:
    assets = output_dir / "assets" / TASK
    if not (assets / "eval" / "base.parquet").is_file():
        raise SystemExit(f"no study outputs under {output_dir}: run scripts/run_study.sh")
    reports = _reports(assets)
    base = reports["base"]
    draws = max((r["data_seed"].n_unique() if "data_seed" in r.columns else 1)
                for name, r in reports.items() if name != "base")
    per_draw = sorted({(r["training_replicate"].n_unique() if "training_replicate" in r.columns
                        else 1) // draws for name, r in reports.items() if name != "base"})
    seeds = (f"{per_draw[0]}" if len(per_draw) == 1
             else f"{per_draw[0]} (up to {per_draw[-1]} in a row that asks for more)")
    facts = (f"Profile `{profile.name}`: {base['question_id'].n_unique()} eval questions x "  # type: ignore[attr-defined]
             f"{int(base['n'].max())} samples ({base['replicate'].n_unique()} eval "
             f"replicate(s)), {draws} data seed(s) x {seeds} training seed(s) per "
             f"configuration, {len(reports) - 1} "
             "evaluated cells")
    if wall_seconds is not None:
        facts += f"; the job ran {wall_seconds / 60:.1f} minutes on this machine"
    parts = [facts + ".", "", achieved(output_dir), ""]
    control, testbed_text = testbed_section(output_dir)
    for name, title in TABLES:
        path = output_dir / TASK / f"{name}.md"
        if path.is_file():
            table = path.read_text(encoding="utf-8").strip()
            parts += [title + ":", "", table, "", *unvalidated_rows(table, control)]
    chosen = selections_section(assets)
    if chosen:
        parts += [chosen, ""]
    agreement_path = assets / "scorer_agreement.parquet"
    per_draw = sorted((assets / "scorer_agreement").glob("data*.parquet"))  # data_seeds > 1
    agreement_rows = (_read(agreement_path) if agreement_path.is_file()
                      else pl.concat([_read(p) for p in per_draw]) if per_draw
                      else None)
    if testbed_text:
        parts += [testbed_text, ""]
    from saturated_dag.scorers.judges import judges_are_copies

    copies = judges_are_copies(profile.policy.model,  # type: ignore[attr-defined]
                               profile.judges.strong.kind)  # type: ignore[attr-defined]
    parts.append(findings_section(reports, agreement_rows, control, copies))
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="outputs/study")
    parser.add_argument("--results-doc", "--readme", dest="results_doc", nargs="?",
                        const=str(RESULTS_DOC), default=None,
                        help="also splice the report into this file's study-results block "
                             "(given alone: docs/results.md; --readme is the old name)")
    parser.add_argument("--wall-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from saturated_dag.profiles import load_profile

    output_dir = Path(args.output_dir)
    text = section(load_profile("study"), output_dir, args.wall_seconds)
    text = describe(output_dir, "bash scripts/run_study.sh") + "\n\n" + text
    (output_dir / "study_report.md").write_text(text, encoding="utf-8")
    print(text)
    if args.results_doc is None:
        print(f"report in {output_dir / 'study_report.md'}; the snapshot in docs/results.md "
              f"refreshes with --results-doc")
        return
    doc = Path(args.results_doc)
    current = doc.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(current):
        raise SystemExit(f"{doc} has no {START} ... {END} block")
    doc.write_text(pattern.sub(lambda _: f"{START}\n{text}{END}", current),
                   encoding="utf-8")


if __name__ == "__main__":
    main()
