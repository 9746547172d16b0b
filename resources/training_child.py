"""The training child process, the external side of Dagster Pipes.

``resources.training.train_with_pipes`` starts ``python -P resources/training_child.py``
(by path, so the parent's ``resources`` package and Dagster itself are not imported here; ``-P``
keeps this folder off ``sys.path``). Pipes hands over, as extras, the ``TrainingJob`` (as
JSON, validated here), where to write the result record and where to keep a plain-text log.
The child trains with the core's ``train_job``, sends each progress line to the run's log
through Pipes, writes the result record, and reports the materialisation: metadata and a data
version, the hash of the adapter's weights file (the same ``file_fingerprint`` the adapter
asset uses on a cache hit).

On an error the traceback goes to the log file too, so the parent can show the last lines.
The child dies with the run process that started it and never publishes an adapter for a run
that has died (``saturated_dag.lifeline``).
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def adapter_version(adapter_dir: Path) -> str:
    """The data version of a trained adapter: the hash of its weights file."""
    from saturated_dag.shards import file_fingerprint

    weights = adapter_dir / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"training wrote no {ADAPTER_WEIGHTS} in {adapter_dir}")
    return file_fingerprint(weights)


def report_metadata(record: dict[str, Any], seconds: float, version: str) -> dict[str, Any]:
    """What the child reports besides the data version (plain values; Pipes infers types)."""
    losses = [h["loss"] for h in record.get("log_history", []) if "loss" in h]
    return {
        "best_epoch": record["best_epoch"],
        "epochs_trained": len(record.get("epochs", [])),
        "training_seconds": round(seconds, 2),
        "adapter_weights_version": version,
        "final_train_loss": losses[-1] if losses else None,
    }


def main() -> None:
    from dagster_pipes import open_dagster_pipes

    from saturated_dag.atomic import atomic_write_text
    from saturated_dag.lifeline import bind_to_parent, require_parent
    from saturated_dag.residency import ResidencyLog
    from saturated_dag.training.isolated import train_job
    from saturated_dag.training.job import TrainingJob

    with open_dagster_pipes() as pipes:
        # die with the run process, and never publish for a run that has died
        parent = int(pipes.get_extra("parent_pid"))
        bind_to_parent(parent)
        job = TrainingJob.from_json(json.dumps(pipes.get_extra("job")),
                                    "training job received through Pipes")
        result_path = Path(pipes.get_extra("result"))
        where = pipes.get_extra("residency_log") if "residency_log" in pipes.extras else None
        residency = ResidencyLog(Path(where) if where else None)
        residency.record("child_start", "training", job.out_dir)
        with Path(pipes.get_extra("log")).open("a", encoding="utf-8") as log_file:

            def say(message: str) -> None:
                log_file.write(message + "\n")
                log_file.flush()
                pipes.log.info(message)

            start = time.monotonic()
            try:
                record = asdict(train_job(
                    job, log=say,
                    before_publish=lambda: require_parent(parent, job.out_dir)))
                version = adapter_version(Path(record["adapter_dir"]))
            except BaseException:
                log_file.write(traceback.format_exc())
                residency.record("child_end", "training", job.out_dir, failed=True)
                raise
        residency.record("child_end", "training", job.out_dir)
        atomic_write_text(result_path, json.dumps(record, default=float))
        pipes.report_asset_materialization(
            metadata=report_metadata(record, time.monotonic() - start, version),
            data_version=version)


if __name__ == "__main__":
    main()
