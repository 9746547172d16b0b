"""The demo's eval workload on the whole machine: this checkout against another commit's.

The workload is what the demo's eval steps do: the demo's eval set (96 chain-sum questions x
8 samples, T=0.6, top-p 0.95, up to 160 tokens) sampled once per LoRA adapter, for
``--adapters`` adapters. Each variant runs the workload in worker processes of its own
checkout (``PYTHONPATH``), so the baseline is the baseline's code, not a reconstruction:

- **baseline** (``--baseline-repo``, e.g. a clone of 42566c5): the layout of its demo, one
  process with torch's default threads (the cores), the adapters one after the other, its
  ``policy.batch_size`` (64);
- **this checkout**, the same layout (the demo's default, ``execution.model_steps:
  one_at_a_time``), this profile's ``policy.batch_size``;
- **this checkout, one per core**: one process per core with one torch thread, the adapters
  shared out among them (``one_per_core``, without Dagster's cost of a process per step).

Tokens per second is the generated tokens of all adapters over the wall time of the variant;
the variants alternate, a warm-up each. The adapters must exist (``--adapter-dir``: folders
of a demo run's adapters, e.g. ``outputs/chain_sum/*/adapter/*``).

    python -m benchmarks.bench_eval_throughput --baseline-repo ../base \
        --adapter-dir outputs/adapters/chain_sum --adapters 4 --repeats 3
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Report, base_parser, median

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys, time
import torch
threads, slots, adapters = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
if threads:
    torch.set_num_threads(threads)
from saturated_dag.profiles import load_profile
from saturated_dag.generation.base import SampleRequest, SamplingParams
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.data.questions import eval_questions
profile = load_profile("demo")
questions = eval_questions(profile, "chain_sum")
backend = TransformersBackend.load("arith-base", batch_size=slots)
prompts = [backend.render(q.prompt_text) for q in questions]
params = SamplingParams(n=8, temperature=0.6, top_p=0.95, max_new_tokens=160, seed=0)
backend.sample_many([SampleRequest(prompts[:8], params, adapters[0])])  # warm-up
begin = time.perf_counter()
tokens = 0
for folder in adapters:  # one adapter per eval step, as the demo
    (result,) = backend.sample_many([SampleRequest(prompts, params, folder)])
    tokens += sum(s.num_tokens for row in result for s in row)
print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - begin,
                  "threads": torch.get_num_threads()}))
"""


def run_variant(repo: Path, python: str, processes: int, threads: int, slots: int,
                adapters: list[str]) -> dict[str, float]:
    """Start ``processes`` workers at once, adapters dealt round-robin; wall time is from the
    first start to the last exit (imports and model loads excluded: each worker times its
    own sampling, and the wall is the slowest worker's)."""
    env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    else:
        env.pop("OMP_NUM_THREADS", None)
    shares = [adapters[k::processes] for k in range(processes)]
    workers = [subprocess.Popen([python, "-c", WORKER, str(threads), str(slots), *share],
                                cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
               for share in shares if share]
    results = []
    for worker in workers:
        out, _ = worker.communicate()
        if worker.returncode:
            raise RuntimeError(f"worker in {repo} failed ({worker.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return {"tokens": sum(r["tokens"] for r in results),
            "seconds": max(r["seconds"] for r in results),
            "threads": results[0]["threads"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from saturated_dag.infra.parallel import cpu_cores
    from saturated_dag.profiles import load_profile

    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--baseline-repo", type=Path, required=True)
    parser.add_argument("--baseline-python", default=None,
                        help="the baseline's interpreter (default: its .venv, else this one)")
    parser.add_argument("--baseline-slots", type=int, default=64)
    parser.add_argument("--adapter-dir", type=Path, required=True)
    parser.add_argument("--adapters", type=int, default=4)
    args = parser.parse_args(argv)
    folders = sorted(str(p.parent) for p in args.adapter_dir.rglob("adapter_config.json"))
    folders = folders[: args.adapters]
    if len(folders) < args.adapters:
        sys.exit(f"{args.adapter_dir}: {len(folders)} adapter folder(s), {args.adapters} asked")
    base_python = args.baseline_python or str(args.baseline_repo / ".venv" / "bin" / "python")
    if not Path(base_python).exists():
        base_python = sys.executable
    cores = cpu_cores()
    slots = load_profile("demo").policy.batch_size
    variants = {
        "baseline": lambda: run_variant(args.baseline_repo.resolve(), base_python, 1, 0,
                                        args.baseline_slots, folders),
        "ours": lambda: run_variant(ROOT, sys.executable, 1, 0, slots, folders),
        "per_core": lambda: run_variant(ROOT, sys.executable, cores, 1, slots, folders),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            runs[name].append(fn())
            time.sleep(1)
    rows, rate = [], {}
    labels = {"baseline": f"baseline {args.baseline_repo.name}: 1 process, default threads, "
                          f"{args.baseline_slots} rows",
              "ours": f"this checkout: 1 process, default threads, {slots} slots",
              "per_core": f"this checkout: {cores} processes x 1 thread, {slots} slots"}
    for name in variants:
        seconds = median([r["seconds"] for r in runs[name]])
        tokens = runs[name][0]["tokens"]
        rate[name] = tokens / seconds
        rows.append([labels[name], seconds, tokens, rate[name]])
    summary = {"ours_over_baseline_tokens_per_s": rate["ours"] / rate["baseline"],
               "per_core_over_baseline_tokens_per_s": rate["per_core"] / rate["baseline"],
               "target": ">= 2", "runs": runs, "adapters": folders}
    report = Report("eval throughput (demo eval workload)", "arith-base",
                    {"adapters": len(folders), "questions": 96, "n": 8,
                     "max_new_tokens": 160, "repeats": args.repeats},
                    ["variant", "median s", "generated tokens", "tokens/s"], rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
