"""Training an adapter in its own process, through Dagster Pipes (the orchestration side).

A crashed or OOM-killed trainer must not take the run with it, and the parent's engines must
not share the device with it, so each adapter trains in a child process
(``resources/training_child.py``). Pipes carries the ``TrainingRequest`` there and brings back
the child's log lines (into the run's log as they happen), its metadata and the adapter's
data version; the result record comes back as a JSON file the child writes last. Swapping
``dg.PipesSubprocessClient`` for a Kubernetes client (``dagster_k8s.PipesK8sClient``) runs the
same child in a GPU pod.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg

from resources import training_child
from resources.inference import InferenceResource, current_step
from saturated_dag.infra.redact import redact_uri
from saturated_dag.infra.residency import ResidencyLog
from saturated_dag.training.request import TrainingRequest

# run by path (see the child's docstring); imported here so the adapters' code version covers it
CHILD = Path(training_child.__file__)


def training_client(work_dir: Path) -> dg.PipesSubprocessClient:
    """The default client: a local child process, unbuffered so log lines arrive as printed.

    Pipes' context and message files live in the training's own work folder (beside the
    adapter, under the output folder) instead of the system's temp folder: a SIGKILLed run
    leaves them where the adapter's next training clears them, not in /tmp for ever."""
    return dg.PipesSubprocessClient(
        env={"PYTHONUNBUFFERED": "1"},
        context_injector=dg.PipesFileContextInjector(str(work_dir / "pipes_context.json")),
        message_reader=dg.PipesFileMessageReader(str(work_dir / "pipes_messages.jsonl")))


TRACKING_URI = "MLFLOW_TRACKING_URI"


def pipes_payload(requests: list[TrainingRequest]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The requests as Pipes carries them, and the child's extra environment.

    Pipes writes its extras to a file in the work folder (``pipes_context.json``, under the
    output folder, left there by a killed run until the next training), so no password goes in
    it: a request holds plain training settings and no URI but its tracking one, and a tracking
    URI with a password travels in the child's environment instead, which the trainer's MLflow
    callback reads (``saturated_dag.training.runner.environment`` sets only the variables a
    request still holds)."""
    env: dict[str, str] = {}
    payload = []
    for request in requests:
        data = request.model_dump(mode="json")
        uri = data["tracking_env"].get(TRACKING_URI)
        if uri is not None and redact_uri(uri) != uri:
            env[TRACKING_URI] = data["tracking_env"].pop(TRACKING_URI)
        payload.append(data)
    return payload, env


def _tail(path: Path, lines: int) -> str:
    if not path.is_file():
        return "(the child wrote no log)"
    with path.open(encoding="utf-8", errors="replace") as handle:
        return "\n".join(line.rstrip("\n") for line in deque(handle, maxlen=lines))


class ChildTraining(NamedTuple):
    """What one training child gave back: a result record per request, in order; the metadata it
    reported (the caller puts it on the step's materialisation: seconds, base-model loads,
    and for one adapter its epochs and loss); and its data version (the adapter's weights
    hash for one adapter, a hash over them for several)."""

    records: list[dict[str, Any]]
    metadata: dict[str, Any]
    data_version: str


def train_with_pipes(context: dg.AssetExecutionContext, requests: list[TrainingRequest],
                     work_dir: Path, inference: InferenceResource | None = None,
                     client: dg.PipesSubprocessClient | None = None,
                     tail_lines: int = 40) -> ChildTraining:
    """Train the adapters ``requests`` describe in one Pipes child (one base-model load); their
    result records, in order, with what the child reported (``ChildTraining``).

    ``inference`` (when given) is released first: no engine of this process stays on the
    device while the child trains; the start and end go to its residency log, and the child
    records its own life there too. A failing child raises ``dg.Failure`` with its exit
    status and the last ``tail_lines`` lines of its log (traceback included); the adapters
    it finished before are published and reused by the next run.
    """
    residency = ResidencyLog(None)
    if inference is not None:
        inference.release()
        residency = inference.residency_log
    work_dir.mkdir(parents=True, exist_ok=True)
    result_path, log_path = work_dir / "result.json", work_dir / "train.log"
    for stale in (result_path, log_path, work_dir / "pipes_context.json",
                  work_dir / "pipes_messages.jsonl"):  # a killed run's, if any
        stale.unlink(missing_ok=True)
    payload, env = pipes_payload(requests)
    extras = {"requests": payload, "result": str(result_path), "log": str(log_path),
              "residency_log": str(residency.path) if residency.path else None,
              "parent_pid": os.getpid()}  # the child dies with this process
    command = [sys.executable, "-P", str(CHILD)]
    what = f"training {requests[0].out_dir}" + (
        f" and {len(requests) - 1} more" if len(requests) > 1 else "")
    step = current_step()
    residency.record("train_start", "training", step,
                     engines_held=inference.loaded_roles() if inference is not None else [])
    try:
        invocation = (client or training_client(work_dir)).run(
            context=context, command=command, extras=extras, env=env)
    except Exception as err:  # a non-zero exit, or Pipes could not talk to the child
        raise dg.Failure(f"{what} failed: {err}; the child's last lines:\n"
                         f"{_tail(log_path, tail_lines)}",
                         metadata={"training_log": dg.MetadataValue.path(str(log_path))}
                         ) from None
    finally:
        residency.record("train_end", "training", step)
    reported = [r for r in invocation.get_results(implicit_materializations=False)
                if isinstance(r, dg.MaterializeResult)]
    version = reported[0].data_version if len(reported) == 1 else None
    if not result_path.is_file() or version is None:
        raise dg.Failure(f"{what}: the child exited cleanly but reported no result "
                         f"(record written: {result_path.is_file()}, materialisations "
                         f"reported: {len(reported)}, data version: {version}); its last "
                         f"lines:\n{_tail(log_path, tail_lines)}")
    records = json.loads(result_path.read_text(encoding="utf-8"))
    if len(records) != len(requests):
        raise dg.Failure(f"{what}: the child recorded {len(records)} results for "
                         f"{len(requests)} requests")
    return ChildTraining(records, dict(reported[0].metadata or {}), version.value)
