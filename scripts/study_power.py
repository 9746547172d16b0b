"""The study's power calculation (docs/study.md), from a pilot run's eval reports.

For each adapter of the pilot's main table: the standard deviation of its per-question
paired difference to the base model (pass@1, each question averaged over its samples and
over every adapter of the row: all its data seeds and training seeds), the
eval questions a 95% interval of half-width ``--effect`` points needs, and the smallest
effect a study of ``--questions`` questions detects with 80% power.

    .venv/bin/python scripts/study_power.py --output-dir outputs --questions 480
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.evaluation.statistics import (
    detectable_effect,
    questions_for_half_width,
    seed_matrix,
)
from saturated_dag.infra.atomic import read_proven_parquet


def _per_question(path: Path, order: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    table = per_question_results(read_proven_parquet(path, "re-materialise that eval report"))
    order = order or sorted(table["question_id"].unique().to_list())
    matrix = seed_matrix(table, 1, order)  # (training seeds, Q) or (data seeds, seeds, Q)
    return matrix.reshape(-1, len(order)).mean(axis=0), order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="outputs", help="the pilot run's outputs")
    parser.add_argument("--task", default="chain_sum")
    parser.add_argument("--effect", type=float, default=3.0, help="points of pass@1")
    parser.add_argument("--questions", type=int, default=480, help="the study's eval set")
    args = parser.parse_args()
    root = Path(args.output_dir) / "assets" / args.task
    base, order = _per_question(root / "eval" / "base.parquet")
    rows = []
    for path in sorted(root.glob("*/eval/*.parquet")):
        run, _ = _per_question(path, order)
        sd = float(np.std(run - base, ddof=1))
        rows.append((f"{path.parent.parent.name}/{path.stem}", sd))
    effect = args.effect / 100
    print(f"Pilot: {args.output_dir} ({len(order)} eval questions, {len(rows)} adapters)\n")
    print(f"| adapter | sd of per-question Δ pass@1 | questions for ±{args.effect:g} points "
          f"| 80%-power effect at {args.questions} questions (points) |")
    print("|---|---|---|---|")
    for name, sd in rows:
        print(f"| {name} | {sd:.3f} | {questions_for_half_width(sd, effect)} | "
              f"{100 * detectable_effect(sd, args.questions):.2f} |")
    sds = [sd for _, sd in rows]
    median = statistics.median(sds)
    print(f"\nmedian sd {median:.3f}: {questions_for_half_width(median, effect)} questions for "
          f"±{args.effect:g} points; at {args.questions} questions a 95% interval is "
          f"±{100 * 1.96 * median / np.sqrt(args.questions):.2f} points and the 80%-power "
          f"effect {100 * detectable_effect(median, args.questions):.2f} points")
    worst = max(sds)
    print(f"largest sd {worst:.3f}: {questions_for_half_width(worst, effect)} questions for "
          f"±{args.effect:g} points; at {args.questions} questions ±"
          f"{100 * 1.96 * worst / np.sqrt(args.questions):.2f} points")


if __name__ == "__main__":
    main()
