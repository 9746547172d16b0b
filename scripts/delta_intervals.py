"""Δ pass@1 to the base model, with a paired 95% bootstrap interval, for every eval report.

    python scripts/delta_intervals.py [--output-dir outputs] [--task chain_sum]

Reads the eval reports (one row per sample) under ``<output dir>/assets/<task>/`` and counts
each question's samples and correct ones; the interval resamples eval questions with their
pairs kept (``statistics.paired_delta``), so it measures the eval set's sampling noise for one
trained adapter, not training-seed noise.
A row marked ``*`` has an interval that excludes 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import polars as pl

from saturated_dag.infra.atomic import read_proven_parquet

ROOT = Path(__file__).resolve().parent.parent


Row = tuple[str, float, float, float]
"""(split/adapter, Δ, low, high), in points of pass@1."""


def delta_rows(output_dir: str | Path, task: str) -> tuple[int, list[Row]]:
    """The number of eval questions and a ``Row`` for every eval report."""
    sys.path.insert(0, str(ROOT))
    from saturated_dag.evaluation.statistics import paired_delta

    root = Path(output_dir) / "assets" / task
    base_file = root / "eval" / "base.parquet"
    if not base_file.is_file():
        raise SystemExit(f"no base eval report at {base_file}: run the demo job first")
    base = _report(base_file)
    base_p1 = base["correct"] / base["n"]
    rows = []
    for path in sorted(root.glob("*/eval/*.parquet")):
        report = _report(path)
        if set(report["question_id"]) != set(base["question_id"]):
            raise SystemExit(f"{path} covers other questions than the base report")
        # the run's pass@1 in the base report's question order, so the pairs line up
        aligned = base.select("question_id").join(report, on="question_id", how="left",
                                                  maintain_order="left")
        run_p1 = aligned["correct"] / aligned["n"]
        found = paired_delta(run_p1.to_numpy(), base_p1.to_numpy())
        delta, low, high = (100 * v for v in (found.estimate, found.low, found.high))
        rows.append((f"{path.parent.parent.name}/{path.name.removesuffix('.parquet')}",
                     delta, low, high))
    return base.height, rows


def _report(path: Path) -> pl.DataFrame:
    """One eval report's (question_id, n, correct), from its samples, each sample once."""
    samples = read_proven_parquet(path, "re-materialise that eval report").select(
        "question_id", "sample_index", "correct")
    if samples.select("question_id", "sample_index").is_duplicated().any():
        raise SystemExit(f"{path} lists a sample of a question more than once")
    return (samples.group_by("question_id", maintain_order=True)
            .agg(n=pl.col("correct").count(), correct=pl.col("correct").sum())
            .sort("question_id"))


def markdown(questions: int, rows: list[Row]) -> str:
    """The rows as a Markdown table; ``*`` marks an interval that excludes 0."""
    lines = [f"Δ pass@1 to the base model (points) with a paired 95% bootstrap interval over "
             f"the {questions} eval questions (`python scripts/delta_intervals.py`):", "",
             "| split/adapter | Δ pass@1 | 95% interval | excludes 0 |", "|---|---|---|---|"]
    for name, delta, low, high in rows:
        mark = "*" if low > 0 or high < 0 else ""
        lines.append(f"| {name} | {delta:+.2f} | [{low:+.2f}, {high:+.2f}] | {mark} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir",
                        default=os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs"))
    parser.add_argument("--task", default="chain_sum")
    args = parser.parse_args(argv)
    print(markdown(*delta_rows(args.output_dir, args.task)))


if __name__ == "__main__":
    main()
