"""The training child process, the external side of Dagster Pipes.

``resources.training.train_with_pipes`` starts ``python -P resources/training_child.py``
(by path, so the parent's ``resources`` package and Dagster itself are not imported here; ``-P``
keeps this folder off ``sys.path``). Pipes hands over, as extras, the training requests of one
step (``TrainingRequest``, as JSON, validated here), where to write the result records and where
to keep a plain-text log. The child trains them with the core's one runner
(``saturated_dag.training.runner.run_trainings``, in this process, one base-model load), with
the run process as their owner, sends each progress line to the run's log, writes the result
records, and reports one materialisation: metadata and the data version of the weights it
trained (``training.folders.weights_version``, the rule the adapter asset records by).

On an error the traceback goes to the log file too, so the parent can show the last lines; both
show a URI's password as ``***`` (``saturated_dag.infra.redact``). The child dies with the run
process that started it, never publishes an adapter for a dead run, and on a CPU runs one torch
thread (``runner.bind_to_owner``), as the side-by-side workers do.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def report_metadata(records: list[dict[str, Any]], seconds: float, versions: list[str],
                    loads: int) -> dict[str, Any]:
    """What the child reports besides the data version (plain values; Pipes infers types):
    for one adapter its epochs and loss, for several how many; the seconds, and how many
    times a base model was read from disk (once for a whole step)."""
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

    from saturated_dag.infra.atomic import atomic_write_text
    from saturated_dag.infra.redact import redact_text
    from saturated_dag.infra.residency import ResidencyLog
    from saturated_dag.training.folders import weights_version
    from saturated_dag.training.request import TrainingRequest
    from saturated_dag.training.runner import (
        InThisProcess,
        bind_to_owner,
        one_torch_thread,
        run_trainings,
    )
    from saturated_dag.training.train import BaseModels

    with open_dagster_pipes() as pipes:
        parent = int(pipes.get_extra("parent_pid"))
        requests = [TrainingRequest.from_json(json.dumps(request),
                                              f"training request {i} received through Pipes")
                    for i, request in enumerate(pipes.get_extra("requests"))]
        # die with the run process (killed, or a zombie not yet reaped), and on a CPU run one
        # torch thread: the same lifeline and thread limit as every process that trains
        bind_to_owner(parent, one_torch_thread(requests))
        result_path = Path(pipes.get_extra("result"))
        where = pipes.get_extra("residency_log") if "residency_log" in pipes.extras else None
        residency = ResidencyLog(Path(where) if where else None)
        bases = BaseModels()  # one load of the base model for every adapter of the step
        start = time.monotonic()
        with Path(pipes.get_extra("log")).open("a", encoding="utf-8") as log_file:

            def say(message: str) -> None:
                message = redact_text(message)
                log_file.write(message + "\n")
                log_file.flush()
                pipes.log.info(message)

            @contextmanager
            def recorded(request: TrainingRequest) -> Iterator[None]:
                """Each training's life in the residency log; a failure's traceback in the
                log file, so the parent can show it."""
                residency.record("child_start", "training", request.out_dir)
                try:
                    yield
                except BaseException as err:
                    log_file.write(redact_text(traceback.format_exc()))
                    residency.record("child_end", "training", request.out_dir, failed=True)
                    shown = redact_text(str(err))
                    if shown != str(err):  # Pipes sends the message to the run's log
                        raise RuntimeError(f"{type(err).__name__}: {shown}") from None
                    raise
                residency.record("child_end", "training", request.out_dir)

            # each the adapter's result.json record, its weights' hash included; published
            # only while the run process lives
            records = run_trainings(requests, InThisProcess(owner=parent, bases=bases,
                                                   around=recorded), log=say)
        versions = [record["weights_version"] for record in records]
        atomic_write_text(result_path, json.dumps(records, default=float))
        version = weights_version(versions)
        pipes.report_asset_materialization(
            metadata=report_metadata(records, time.monotonic() - start, versions,
                                     bases.loads),
            data_version=version)


if __name__ == "__main__":
    main()
