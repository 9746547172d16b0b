"""One adapter's training from its ``TrainingJob``, in whichever process calls it.

vLLM does not reliably free GPU memory inside a process, and a crashed or OOM-killed trainer
should not take the orchestrating process with it, so the pipeline trains each adapter in a
child process: the Dagster layer starts it through Dagster Pipes
(``resources/training.py``, ``resources/training_child.py``), which calls ``train_job``
with the job it received as JSON, validated there (``TrainingJob.model_validate``).
Without Dagster: ``python -m saturated_dag.training.isolated JOB.json RESULT.json``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from saturated_dag.training.folders import ADAPTER_WEIGHTS, RESULT_FILE, VALIDATION_FILE
from saturated_dag.training.job import TrainingJob

LogFn = Callable[[str], None]




def train_job(job: TrainingJob, log: LogFn | None = None,
              before_publish: Callable[[], None] | None = None,
              bases: Any = None) -> dict[str, Any]:
    """Train the adapter ``job`` describes (in whichever process calls this) and write its
    ``result.json`` (``RESULT_FILE``) into the adapter folder, so a trained adapter is
    whole, and reusable, the moment its training ends, whatever happens to the trainings
    after it. Returns that record (``TrainResult``'s fields, ``weights_version``,
    ``cache_key``), so no caller reads the file back or hashes the weights again.

    ``job.data`` is the training set's Parquet file, read as a polars frame;
    ``before_publish`` is ``train_adapter``'s (the training child checks its run is alive);
    ``bases`` (``train.BaseModels``) shares one base-model load among several trainings."""
    from saturated_dag.evaluation import evaluate, summarise
    from saturated_dag.generation.transformers_backend import TransformersBackend
    from saturated_dag.tasks import validation_questions
    from saturated_dag.training.train import train_adapter

    profile = job.profile
    questions = validation_questions(profile, job.task)
    params = profile.sampling.params()
    per_epoch: list[pl.DataFrame] = []

    def validation_pass_at_1(model: Any, tokenizer: Any) -> float:
        backend = TransformersBackend(model, tokenizer, batch_size=job.batch_size,
                                      chat_template=job.chat_template)
        # the same prompts and answer rule as the pool and the eval reports
        backend.enable_thinking = job.enable_thinking
        table, _ = evaluate(questions, backend, params, answer_check=profile.answer_check)
        per_epoch.append(table.select("question_id", "n", "correct"))
        return summarise(table, ks=(1,))["pass@1"] / 100

    with environment(job.tracking_env):  # the MLflow callback's store and tags
        result = train_adapter(job.method, job.base_model, pl.read_parquet(job.data),
                               job.trainer_settings(), job.out_dir,
                               eval_fn=validation_pass_at_1, log=log, record=job.record,
                               before_publish=before_publish,
                               report_to=profile.tracking.report_to, bases=bases)
    folder = Path(result.adapter_dir)
    if per_epoch:  # the kept epoch's per-question results: the one-SE rule pairs them
        from saturated_dag.atomic import atomic_write_parquet

        atomic_write_parquet(per_epoch[result.best_epoch - 1], folder / VALIDATION_FILE)
    return write_result(folder, asdict(result), job.record.get("cache_key"))


def write_result(folder: Path, record: dict[str, Any], cache_key: str | None) -> dict[str, Any]:
    """``folder/result.json``: the training's record, its weights' hash and its cache key."""
    from saturated_dag.atomic import atomic_write_text
    from saturated_dag.shards import file_fingerprint

    written = {**record, "weights_version": file_fingerprint(folder / ADAPTER_WEIGHTS),
               "cache_key": cache_key}
    atomic_write_text(folder / RESULT_FILE, json.dumps(written, default=float))
    return written


def train_jobs(jobs: list[TrainingJob], log: LogFn | None = None,
               before_publish: Callable[[], None] | None = None,
               workers: int = 0) -> list[dict[str, Any]]:
    """Train ``jobs`` with one load of each base model (``train.BaseModels``): a cell's grid
    in one step. Each adapter is published, with its ``result.json``, as soon as it is
    trained.

    ``workers`` (a CPU's cores, ``parallel.training_workers``; 0 on an accelerator) makes
    every training run one torch thread, so an adapter's weights depend neither on the
    machine's cores nor on how many adapters its step trains: several side by side in that
    many processes (``side_by_side``), a single one in this process. With 0, one after
    another in this process, with its threads."""
    from saturated_dag.parallel import torch_threads
    from saturated_dag.training.train import BaseModels

    if workers > 1 and len(jobs) > 1:
        if before_publish is not None:
            raise ValueError("side-by-side training takes no before_publish callable (it "
                             "cannot cross into the workers, which check their own run before "
                             "publishing); a training child passes its check with workers=0")
        from saturated_dag.training.side_by_side import train_side_by_side

        return train_side_by_side(jobs, workers, log)
    bases = BaseModels()
    results = []
    with torch_threads(1 if workers else None):
        for index, job in enumerate(jobs, 1):
            if log is not None and len(jobs) > 1:
                log(f"adapter {index} of {len(jobs)}: {job.out_dir}")
            results.append(train_job(job, log=log, before_publish=before_publish,
                                     bases=bases))
    return results


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` set in ``os.environ`` for the block, then the environment's tracking
    variables restored: training in the run's own process (``training.isolate: false``) must
    not leave one adapter's tags, or the experiment id MLflow itself exports, behind for the
    next."""
    def tracked() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in variables or "MLFLOW" in k}

    saved = tracked()
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in tracked():
            if name not in saved:
                del os.environ[name]
        os.environ.update(saved)


def _main(job_path: str, result_path: str) -> None:
    job = TrainingJob.from_json(Path(job_path).read_text(), job_path)
    result = train_job(job, log=lambda m: print(f"[train] {m}", flush=True))
    out = Path(result_path)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=float))
    os.replace(tmp, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m saturated_dag.training.isolated JOB.json RESULT.json")
    _main(sys.argv[1], sys.argv[2])
