"""Print a testbed run's verdicts and validation table as Markdown (docs/testbed.md).

    python scripts/testbed_report.py [--output-dir outputs/testbed]

Reads ``<output-dir>/chain_sum/testbed_*`` (written by ``chain_sum/testbed_validation``);
writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="outputs/testbed")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    from study_report import testbed_section

    controls, text = testbed_section(Path(args.output_dir))
    if controls is None:
        raise SystemExit(f"no testbed outputs under {args.output_dir}: run "
                         "scripts/run_testbed.sh")
    print(text)


if __name__ == "__main__":
    main()
