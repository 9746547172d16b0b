"""The cost of checking every adapter before it is read (issue 46, item 1), on the demo.

Every reader of an adapter resolves it through ``assets._adapter_files.adapter_dir``, which
checks the folder against its record (``training.folders.check_adapter``: two JSON records
read, the weights hashed once per process). This builds, in a temporary output folder, one
key folder per adapter the ``demo`` profile trains, each with a weights file of the real size
(PEFT's ``save_pretrained`` of a LoRA with the demo's rank and targets on the embedded base
model) and records of a 4-epoch training, then times ``--calls`` checks of every adapter in
this one process (the demo runs its parts in one process, so each file is hashed once): an
upper bound on what the demo's readers do (each adapter is read by at most its load check,
its selection, its cell's eval report twice, the runs table and a sweep table). The total is
reported against the demo's wall time (``--demo-seconds``: README's 209 s).

    python -m benchmarks.bench_adapter_check
    python -m benchmarks.bench_adapter_check --calls 8 --demo-seconds 209
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assets._adapter_files import adapter_dir, adapter_home
from saturated_dag.experiments import experiment_plan
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.runs_table import task_adapters
from saturated_dag.training.folders import ADAPTER_WEIGHTS, RESULT_FILE, key_folder, record_current


def real_weights(profile_name: str, folder: Path) -> Path:
    """A LoRA adapter of the profile's rank and targets on its base model, saved by PEFT:
    the weights file every demo adapter has (its size; the values do not change the cost)."""
    from peft import LoraConfig, get_peft_model

    from saturated_dag.generation.models import load_model

    profile = load_profile(profile_name)
    model, _ = load_model(profile.policy.model)
    training = profile.training
    config = LoraConfig(r=training.lora_r, lora_alpha=training.lora_alpha,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    get_peft_model(model, config).save_pretrained(folder)
    return folder / ADAPTER_WEIGHTS


def build(profile_name: str, out: Path, weights: bytes) -> list[tuple[str, object]]:
    """One current key folder per adapter of the profile, with its records; the adapters."""
    from saturated_dag.infra.shards import file_fingerprint

    profile = load_profile(profile_name)
    adapters = [(task, a.adapter) for task, plan in experiment_plan(profile).items()
                for a in task_adapters(plan)]
    epochs = [{"epoch": e, "step": 10 * e, "val_pass@1": 0.5} for e in range(1, 5)]
    history = [{"loss": 1.0, "learning_rate": 1e-3, "epoch": s / 10, "step": s}
               for s in range(1, 41)]
    for index, (task, exp) in enumerate(adapters):
        key = f"{index:016x}" + "0" * 48
        home = adapter_home(str(out), task, exp)
        folder = key_folder(home, key)
        folder.mkdir(parents=True)
        (folder / ADAPTER_WEIGHTS).write_bytes(weights)
        (folder / "training_config.json").write_text(json.dumps(
            {"cache_key": key, "method": exp.method, "settings": {"seed": 0},
             "epochs": epochs, "best_epoch": 2}, indent=1))
        (folder / RESULT_FILE).write_text(json.dumps(
            {"adapter_dir": str(folder), "best_epoch": 2, "epochs": epochs,
             "log_history": history, "cache_key": key,
             "weights_version": file_fingerprint(folder / ADAPTER_WEIGHTS)}))
        record_current(home, folder)
    return adapters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--calls", type=int, default=8, help="reader checks per adapter")
    parser.add_argument("--demo-seconds", type=float, default=209.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        weights = real_weights(args.profile, Path(scratch) / "peft").read_bytes()
        out = Path(scratch) / "out"
        adapters = build(args.profile, out, weights)
        from saturated_dag.infra import shards

        shards._FINGERPRINTS.clear()  # as a fresh run process: nothing hashed yet
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.calls):
            for task, exp in adapters:
                adapter_dir(str(out), task, exp)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    share = 100 * wall / args.demo_seconds
    print(json.dumps({"adapters": len(adapters), "weights_bytes": len(weights),
                      "calls_per_adapter": args.calls, "checks": len(adapters) * args.calls,
                      "wall_seconds": round(wall, 4), "cpu_seconds": round(cpu, 4),
                      "demo_seconds": args.demo_seconds,
                      "share_of_demo_wall_percent": round(share, 3)}, indent=1))


if __name__ == "__main__":
    main()
