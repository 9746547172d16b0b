"""Record what produced an output folder: ``<output dir>/run_record.json``.

Why: docs/results.md shows a *snapshot* of the demo's and the study's tables, refreshed by an
explicit command (``scripts/readme_results.py``, ``scripts/study_report.py --results-doc``),
never by the run itself, so running README's first command leaves the clone clean. A
snapshot must say what produced it: the commit (and whether the tree had uncommitted changes),
the machine, the date and the job's wall time. ``scripts/run_demo.sh`` and
``scripts/run_study.sh`` write this record after their job; the refresh commands quote it
(``describe``).

    python scripts/run_record.py --output-dir outputs --job demo --profile demo --wall-seconds 236
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD = "run_record.json"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine() -> str:
    """The CPU model and its core count (``/proc/cpuinfo``), e.g. ``AMD EPYC (2 cores)``."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or 'unknown CPU'} ({os.cpu_count()} cores)"


def record(output_dir: Path, job: str, profile: str, wall_seconds: float) -> dict[str, Any]:
    """Write and return the record of the run that just filled ``output_dir``."""
    data = {
        "job": job, "profile": profile, "wall_seconds": round(wall_seconds, 1),
        "commit": _git("rev-parse", "HEAD") or "unknown",
        # tracked files changed: the numbers may not be the commit's own
        "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": machine(),
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / RECORD).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def describe(output_dir: Path, command: str) -> str:
    """One sentence for a results snapshot: which command, commit and machine produced it.

    Refuses (SystemExit) where the folder has no record: a snapshot of unknown origin is
    exactly what the documentation must not show."""
    path = output_dir / RECORD
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run `{command}` first (it records the commit "
                         "and machine that produced the tables)")
    data = json.loads(path.read_text(encoding="utf-8"))
    commit = str(data["commit"])[:7]
    changes = " with uncommitted changes" if data.get("uncommitted_changes") else ""
    return (f"Snapshot of `{command}` at commit {commit}{changes}, on {data['machine']}, "
            f"finished {data['finished_utc']} UTC, job wall time {data['wall_seconds']:g} s.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--job", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--wall-seconds", required=True, type=float)
    args = parser.parse_args(argv)
    data = record(args.output_dir, args.job, args.profile, args.wall_seconds)
    print(f"run recorded in {args.output_dir / RECORD}: commit {data['commit'][:7]}, "
          f"{data['machine']}, {data['wall_seconds']} s")


if __name__ == "__main__":
    main()
