"""Cached re-materialisation (issue 7.2): an unchanged expensive asset, materialised twice.

The demo profile's ``chain_sum/generation_pool`` and ``chain_sum/self_judge_scores`` are
materialised into a fresh output folder, each twice in a row with nothing changed. The first
run samples (judges) every shard; the second finds every shard under its cache key and
computes nothing (no model is loaded). Reported: the asset step's duration from Dagster's own
step events, and the wall time of the whole ``materialize`` call, first vs second.

    python -m benchmarks.bench_cache                       # demo profile
    python -m benchmarks.bench_cache --profile ci --out /tmp/bench_cache
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import dagster as dg

from assets import profile_assets
from resources import make_resources
from saturated_dag.profiles import load_profile


def materialise(profile: str, out: Path, names: list[str]) -> dict[str, dict]:
    """Materialise ``chain_sum/<name>`` for each name; per asset: step seconds and metadata."""
    prefix = load_profile(profile).key_prefix_parts()  # testbed/..., study/...
    keys = [dg.AssetKey([*prefix, "chain_sum", n]) for n in names]
    start = time.perf_counter()
    # a fresh resource per call: its engines are set up in the run and torn down after it,
    # so the second call cannot lean on a model the first one loaded
    assets, _ = profile_assets(load_profile(profile))
    result = dg.materialize(assets, selection=dg.AssetSelection.assets(*keys),
                            resources=make_resources(profile, str(out)))
    wall = time.perf_counter() - start
    assert result.success
    report = {}
    for name in names:
        node = f"chain_sum__{name}"
        step = next(e for e in result.all_events
                    if e.is_step_success and e.step_key == node)
        meta = result.asset_materializations_for_node(node)[0].metadata
        report[name] = {"step_s": step.event_specific_data.duration_ms / 1000, "wall_s": wall,
                        "cache": meta["cache"].value if "cache" in meta else None,
                        "shards_reused": meta.get("shards_reused", dg.MetadataValue.int(0)).value,
                        "shards_total": meta.get("shards_total", dg.MetadataValue.int(0)).value}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--out", default=None, help="output folder (default: a fresh temp dir)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_cache_"))
    if out.exists():
        shutil.rmtree(out)
    rows = []
    for name, upstream in [("generation_pool", []), ("self_judge_scores",
                                                     ["difficulty_partitions"])]:
        if upstream:
            materialise(args.profile, out, upstream)
        first = materialise(args.profile, out, [name])[name]
        second = materialise(args.profile, out, [name])[name]
        rows.append({"asset": f"chain_sum/{name}", "first": first, "second": second,
                     "step_ratio": second["step_s"] / first["step_s"],
                     "wall_ratio": second["wall_s"] / first["wall_s"]})
    print("| asset | first: step / call (s) | second: step / call (s) | second cache | "
          "second / first (step, call) |")
    print("|---|---|---|---|---|")
    for r in rows:
        f, s = r["first"], r["second"]
        print(f"| {r['asset']} | {f['step_s']:.2f} / {f['wall_s']:.2f} | "
              f"{s['step_s']:.2f} / {s['wall_s']:.2f} | {s['cache']} "
              f"({s['shards_reused']}/{s['shards_total']} shards reused) | "
              f"{100 * r['step_ratio']:.1f}%, {100 * r['wall_ratio']:.1f}% |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
