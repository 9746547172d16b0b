"""The training child process, the external side of Dagster Pipes.

``resources.training.train_with_pipes`` starts ``python -P resources/training_child.py``
(by path, so the parent's ``resources`` package and Dagster itself are not imported here; ``-P``
keeps this folder off ``sys.path``). Pipes hands over, as extras, the training jobs
(``TrainingJob``, as JSON, validated here), where to write the result records and where to
keep a plain-text log. The jobs are the adapters of one step (a cell's grid), trained one
after another with one load of the base model (``train.BaseModels``). The child trains each
with the core's ``train_job`` (which publishes the adapter with its ``result.json``), sends
each progress line to the run's log through Pipes, writes the list of result records, and
reports one materialisation: metadata and a data version, the hash of the adapter's weights
file for one adapter (the same ``file_fingerprint`` the adapter asset uses on a cache hit),
a hash over them for several.

On an error the traceback goes to the log file too, so the parent can show the last lines.
The child dies with the run process that started it (a zombie counts as dead) and never
publishes an adapter for a run that has died (``saturated_dag.lifeline``).
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path
from typing import Any


def combined_version(versions: list[str]) -> str:
    """One data version for the weights of several adapters trained in one child."""
    import hashlib

    return hashlib.sha256(json.dumps(versions).encode()).hexdigest()


def report_metadata(records: list[dict[str, Any]], seconds: float, versions: list[str],
                    loads: int) -> dict[str, Any]:
    """What the child reports besides the data version (plain values; Pipes infers types):
    for one adapter its epochs and loss, for several how many; the seconds, and how many
    times a base model was read from disk (once for a whole grid)."""
    out: dict[str, Any] = {"adapters_trained": len(records),
                           "training_seconds": round(seconds, 2),
                           "base_model_loads": loads}
    if len(records) == 1:
        losses = [h["loss"] for h in records[0].get("log_history", []) if "loss" in h]
        out.update({"best_epoch": records[0]["best_epoch"],
                    "epochs_trained": len(records[0].get("epochs", [])),
                    "adapter_weights_version": versions[0],
                    "final_train_loss": losses[-1] if losses else None})
    return out


def main() -> None:
    from dagster_pipes import open_dagster_pipes

    from saturated_dag.atomic import atomic_write_text
    from saturated_dag.lifeline import bind_worker, require_parent
    from saturated_dag.parallel import limit_threads, training_workers
    from saturated_dag.residency import ResidencyLog
    from saturated_dag.training.isolated import train_job
    from saturated_dag.training.job import TrainingJob
    from saturated_dag.training.train import BaseModels

    with open_dagster_pipes() as pipes:
        # die with the run process (killed, or a zombie not yet reaped), and never publish
        # for a run that has died: the same lifeline as every worker a run starts
        parent = int(pipes.get_extra("parent_pid"))
        bind_worker(parent)
        jobs = [TrainingJob.from_json(json.dumps(job), f"training job {i} received through Pipes")
                for i, job in enumerate(pipes.get_extra("jobs"))]
        if jobs and training_workers(jobs[0].profile):
            limit_threads(1)  # on a CPU every training runs one thread, wherever it runs
        result_path = Path(pipes.get_extra("result"))
        where = pipes.get_extra("residency_log") if "residency_log" in pipes.extras else None
        residency = ResidencyLog(Path(where) if where else None)
        bases = BaseModels()  # one load of the base model for every adapter of the step
        records, versions = [], []
        start = time.monotonic()
        with Path(pipes.get_extra("log")).open("a", encoding="utf-8") as log_file:

            def say(message: str) -> None:
                log_file.write(message + "\n")
                log_file.flush()
                pipes.log.info(message)

            for index, job in enumerate(jobs, 1):
                residency.record("child_start", "training", job.out_dir)
                if len(jobs) > 1:
                    say(f"adapter {index} of {len(jobs)}: {job.out_dir}")
                try:
                    # the adapter's result.json record, its weights' hash included
                    record = train_job(
                        job, log=say, bases=bases,
                        before_publish=lambda job=job: require_parent(parent, job.out_dir))
                    versions.append(record["weights_version"])
                except BaseException:
                    log_file.write(traceback.format_exc())
                    residency.record("child_end", "training", job.out_dir, failed=True)
                    raise
                residency.record("child_end", "training", job.out_dir)
                records.append(record)
        atomic_write_text(result_path, json.dumps(records, default=float))
        version = versions[0] if len(versions) == 1 else combined_version(versions)
        pipes.report_asset_materialization(
            metadata=report_metadata(records, time.monotonic() - start, versions,
                                     bases.loads),
            data_version=version)


if __name__ == "__main__":
    main()
