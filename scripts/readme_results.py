"""Refresh the demo snapshot in docs/results.md (between the ``demo-results`` markers).

Why a script: the documented results must be the ones the demo command produced, not a hand
copy. It is the explicit refresh command, run by hand after ``scripts/run_demo.sh`` (the run
itself never rewrites a tracked file); it reads the tables the table assets wrote under
``<output dir>/<task>/``, each value and Δ with its 95% interval (``docs/statistics.md``), the
profile's rules (pairs, answer checking, eval set), and the run's record (commit, machine,
wall time: ``scripts/run_record.py``), so the same run leaves the file byte-identical. (The
name is historical: the snapshot used to live in README.md.)

    python scripts/readme_results.py [--profile demo] [--output-dir outputs]
                                     [--results-doc docs/results.md]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from run_record import describe  # noqa: E402  (a script beside this one)

START, END = "<!-- demo-results:start -->", "<!-- demo-results:end -->"
RESULTS_DOC = ROOT / "docs" / "results.md"  # the page that holds the snapshot
TABLES = (
    ("results_table", "Table 1 / Table 7 shape (`{task}/results_table`)"),
    ("rank_weight_ablation", "Figure 6 shape (`{task}/rank_weight_ablation`)"),
    ("rrhf_variants", "Table 8 shape (`{task}/rrhf_variants`)"),
    ("dpo_beta_sweep", "Table 9 shape (`{task}/dpo_beta_sweep`)"),
)


def rules(profile: object) -> str:
    """The rules behind the numbers, in one line per rule."""
    t = profile.training  # type: ignore[attr-defined]
    pairs = ("lowest-scored *different text* as y_l (`dpo_distinct_texts: true`, not the "
             "paper's rule)" if t.dpo_distinct_texts else
             "the paper's y_w = argmax, y_l = argmin with random tie-breaks")
    check = ("Math-Verify's own extraction (the paper's rule)"
             if profile.answer_check == "math_verify"  # type: ignore[attr-defined]
             else "the last `\\boxed{}` only (not the paper's rule)")
    return "\n".join([
        f"- DPO pairs: {pairs}",
        f"- answer checking: {check} (`answer_check: {profile.answer_check}`)",  # type: ignore[attr-defined]
        f"- batch: {t.batch_size} completions (DPO: pairs) per step, learning rate "
        f"{t.learning_rate:g}, {t.epochs} epochs (best by validation pass@1), "
        f"DPO β {t.dpo_beta:g}, σ-RRHF λ {t.rrhf_rank_weight:g}",
        f"- selection (App. B): {selection_text(t)}; {t.replicates} training seed(s) per adapter",
    ])


def selection_text(training: object) -> str:
    """``training.selection`` in words: what each cell chooses among, by validation pass@1."""
    from saturated_dag.experiments import SELECTION_LISTS

    only = {"dpo_betas": " (DPO cells)", "rrhf_rank_weights": " (σ-RRHF cells)"}
    chosen = training.selection  # type: ignore[attr-defined]
    lists = [f"{name} {{{', '.join(f'{v:g}' for v in getattr(chosen, name))}}}"
             f"{only.get(name, '')}" for name in SELECTION_LISTS
             if getattr(chosen, name) is not None]
    if not lists:
        return "one configuration per cell (no selection)"
    return ("cells train " + " x ".join(lists)
            + " and report the best validation pass@1 (`<split>/selection/<cell>`)")


def section(profile: object, output_dir: Path) -> str:
    """What produced the snapshot, the rules, then each task's tables (values and Δ with
    their intervals)."""
    parts: list[str] = []
    for task in profile.tasks:  # type: ignore[attr-defined]
        tables = [(title, output_dir / task / f"{name}.md") for name, title in TABLES]
        tables = [(title, path) for title, path in tables if path.is_file()]
        for title, path in tables:
            body = path.read_text(encoding="utf-8").strip()
            parts += [title.format(task=task) + ":", "", body, ""]
    if not parts:
        raise SystemExit(f"no result tables under {output_dir}: run the demo job first")
    parts = [describe(output_dir, "bash scripts/run_demo.sh"), "", rules(profile), "", *parts]
    return "\n".join(parts).rstrip() + "\n"


def splice(doc: str, body: str, name: str = "the results page") -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"{name} has no {START} ... {END} block")
    return pattern.sub(lambda _m: f"{START}\n{body}{END}", doc)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=os.environ.get("SATURATED_DAG_PROFILE", "demo"))
    parser.add_argument("--output-dir",
                        default=os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs"))
    parser.add_argument("--results-doc", "--readme", dest="results_doc",
                        default=str(RESULTS_DOC),
                        help="the Markdown file whose demo-results block is replaced "
                             "(default: docs/results.md; --readme is the old name)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from saturated_dag.profiles import load_profile

    profile = load_profile(args.profile)
    doc = Path(args.results_doc)
    text = splice(doc.read_text(encoding="utf-8"), section(profile, Path(args.output_dir)),
                  str(doc))
    doc.write_text(text, encoding="utf-8")
    print(f"demo results in {doc} updated from {args.output_dir} (profile {profile.name})")


if __name__ == "__main__":
    main()
