"""How a profile's runs execute: cached stages (``stages``), model steps at once on CPU
(``execution``), what the sensors start by themselves (``automation``) and experiment
tracking (``tracking``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from saturated_dag.config.base import Strict


class ExecutionSettings(Strict):
    """How many model steps a run executes at once on CPU (``saturated_dag/infra/parallel.py``).

    On an accelerator a run is always one process (the engine loads once) with one model step
    at a time per device; this setting is read only when every model is on the CPU.
    """

    model_steps: Literal["one_at_a_time", "one_per_core"] = "one_at_a_time"
    """``one_at_a_time``: the run's own process, one model step at a time on every core's
    thread (the in-process executor; the gpu concurrency limit has one slot). ``one_per_core``: the
    multiprocess executor, as many model steps at once as there are cores, each a process of
    its own with one torch thread (the limit has a slot per core). Measured on the demo
    (2 cores, bbd3ea7, ``CHANGELOG.md``, "Benchmark history"): one at a time 273 s of run, one
    per core 356 s (1.30x), because Dagster starts a process per step (about 1.1 s each, 176
    steps) and most of the demo's steps last 1 to 4 s. ``one_per_core`` pays where steps are
    few and long."""


class AutomationSettings(Strict):
    """What the automation sensors may start by themselves (``assets/automation.py``).

    CPU assets (partitions, datasets, tables, agreement) always follow their upstream data and
    their own code; GPU assets (pool, judges, entropy, adapters, eval reports) run by
    themselves only when missing or when upstream data changed.
    """

    gpu_on_code_change: bool = False
    """True: a GPU asset whose code version changed (an edit to any module it imports) is
    re-run by the ``automation_gpu`` sensor too. Off in every shipped profile: one edit to a
    widely imported module would otherwise queue every pool, judge and adapter of the profile
    (``paper`` has over 60 adapters) the moment the code location reloads."""


class StageSettings(Strict):
    """Resumable, cached stages (``saturated_dag.infra.shards``): generation, judging, entropy,
    eval.

    Finished shards are kept under ``<output_dir>/stages/<stage>/<key>/``; a crashed run
    resumes from them and an unchanged re-run reuses them all.
    """

    shard_questions: int = Field(64, ge=1)
    """Questions per shard: a crash costs at most one shard of work."""
    cache: bool = True
    """False: shards are computed in memory only (same plan and seeds, nothing reused)."""


TRACKING_STORE = "mlflow.db"
"""The default MLflow store's file under the output folder (``TrackingSettings.uri``)."""


class TrackingSettings(Strict):
    """Experiment tracking in MLflow (``docs/tracking.md``), off unless a profile asks for it.

    Why opt-in: tracking needs the ``mlflow`` extra, and the runs table (each task's
    ``runs_table`` asset) already holds every number; MLflow adds the comparison across
    profiles, commits and nights in ``mlflow ui``. No server: the default store is a SQLite
    file in the output folder.
    """

    mlflow: bool = False
    """True: each task's ``runs_table`` logs one MLflow run per trained adapter (its
    hyperparameters, validation and eval numbers, ``training_config.json``), and the trainers
    report their per-step logs to MLflow (``report_to``)."""
    tracking_uri: str | None = Field(None, min_length=1)
    """Where the runs go: any MLflow tracking URI (``sqlite:///...``, a folder, a server's
    ``http://...``). None: ``sqlite:///<output_dir>/mlflow.db``, beside the profile's outputs."""
    experiment: str = Field("saturated-dag", min_length=1)
    """The MLflow experiment every profile logs to, so one ``mlflow ui`` compares them; the
    runs' tags say which profile, task and commit each is."""

    @property
    def report_to(self) -> str:
        """TRL's / transformers' ``report_to``: ``"mlflow"`` when tracking is on, else
        ``"none"`` (no integration is looked up, nothing is imported)."""
        return "mlflow" if self.mlflow else "none"

    def uri(self, output_dir: str | Path) -> str:
        """The tracking URI: ``tracking_uri``, or the SQLite store in ``output_dir`` (made
        absolute, so the trainer's child process and ``mlflow ui`` find the same file)."""
        if self.tracking_uri is not None:
            return self.tracking_uri
        folder = Path(output_dir).expanduser().resolve()
        return f"sqlite:///{folder / TRACKING_STORE}"
