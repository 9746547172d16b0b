"""Δ pass@1 to the base model, with a paired 95% bootstrap interval, for every eval report.

    python scripts/delta_intervals.py [--output-dir outputs] [--task chain_sum]

Reads the eval reports' per-question (n, correct) under ``<output dir>/assets/<task>/``; the
interval resamples eval questions with their pairs kept (``paired_bootstrap_delta``), so it
measures the eval set's sampling noise for one trained adapter, not training-seed noise.
A row marked ``*`` has an interval that excludes 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir",
                        default=os.environ.get("SATURATED_DAG_OUTPUT_DIR", "outputs"))
    parser.add_argument("--task", default="chain_sum")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import pandas as pd

    from saturated_dag.metrics import paired_bootstrap_delta

    root = Path(args.output_dir) / "assets" / args.task
    base_file = root / "eval" / "base.parquet"
    if not base_file.is_file():
        raise SystemExit(f"no base eval report at {base_file}: run the demo job first")
    base = pd.read_parquet(base_file).set_index("question_id")
    base_p1 = base["correct"] / base["n"]
    print(f"{len(base)} eval questions; Δ pass@1 in points, paired bootstrap 95% interval")
    for path in sorted(root.glob("*/eval/*.parquet")):
        report = pd.read_parquet(path).set_index("question_id")
        if set(report.index) != set(base.index):
            raise SystemExit(f"{path} covers other questions than the base report")
        run_p1 = (report["correct"] / report["n"]).loc[base.index]
        delta, low, high = (100 * v for v in paired_bootstrap_delta(run_p1, base_p1))
        mark = " *" if low > 0 or high < 0 else ""
        name = f"{path.parent.parent.name}/{path.name.removesuffix('.parquet')}"
        print(f"{name:45s} {delta:+6.2f} [{low:+6.2f}, {high:+6.2f}]{mark}")


if __name__ == "__main__":
    main()
