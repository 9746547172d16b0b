"""The runs table's rows as MLflow runs (``tracking.mlflow: true``; ``docs/tracking.md``).

One MLflow run per row of a task's runs table (``saturated_dag.reporting.runs_table``), named
after the adapter: hyperparameters as params, kept epoch, validation and eval numbers as metrics,
profile, task, split, method, scorer and git commit as tags, the adapter's
``training_config.json`` and the row as artifacts.

Idempotent by content: a run carries a key (``row_key``: a hash of the profile, the output
folder, the commit and the row); a row whose key is logged and finished is not logged again, a
changed row is a new run beside the old one (MLflow params are write-once), and a run left
unfinished by a crash is replaced.

The store is opened at the start of the step that uses it (``open_store``), so one that cannot
be opened fails at once naming ``tracking.tracking_uri``, its value and the reason. A password
in the URI goes to MLflow's client and nowhere else: messages, logs and metadata show
``user:***@host`` (``saturated_dag.infra.redact``).

Why MLflow's own client, not ``dagster-mlflow``: that resource opens one MLflow run per Dagster
run, and here one materialisation holds a run per adapter. ``mlflow`` (the ``mlflow`` extra) is
imported only when a profile turns tracking on.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saturated_dag.config import TrackingSettings
from saturated_dag.infra.redact import redact_text, redact_uri
from saturated_dag.reporting.runs_table import HYPERPARAMETERS

TAG_PREFIX = "saturated_dag."
KEY_TAG = f"{TAG_PREFIX}key"
"""The tag that makes logging idempotent (``row_key``)."""
ROW_TAGS = ("task", "split", "method", "scorer", "adapter", "configuration", "cells", "chosen",
            "eval report", "eval_set")
"""Row columns logged as tags (text a run is filtered and grouped by in ``mlflow ui``)."""
ROW_METRICS = ("epoch kept", "validation pass@1", "pass@1", "pass@1 low", "pass@1 high",
               "Δ pass@1", "Δ pass@1 low", "Δ pass@1 high", "questions", "replicates")
"""Row columns logged as metrics, besides each ``pass@k`` column and its Δ and interval."""
ROW_ARTIFACT = "runs_table_row.json"
ADAPTER_ARTIFACTS = ("training_config.json",)
"""Files of the adapter's folder logged with its run (not the weights: they stay in the
output folder, which the row's ``adapter_path`` names)."""
MLFLOW_EXTRA = "pip install 'saturated-dag[mlflow]' (or: pip install mlflow-skinny)"
URI_SETTING = "tracking.tracking_uri"
"""The profile setting that names the store, as errors name it."""


class TrackingError(RuntimeError):
    """Tracking is on but cannot log (MLflow missing, the store unreachable)."""


def metric_name(column: str) -> str:
    """A runs-table column as an MLflow key (letters, digits, ``_-. /:``): ``Δ pass@8 low``
    -> ``delta_pass_at_8_low``."""
    text = column.replace("Δ", "delta").replace("@", "_at_")
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")


@dataclass(frozen=True)
class Source:
    """Where the rows come from: every run is tagged with these."""

    profile: str
    output_dir: str
    commit: str | None = None
    dirty: bool | None = None
    """Whether tracked files differed from ``commit`` (None: unknown)."""
    extra_tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    """More tags (the Dagster run id), not part of the key: the same row logged by another
    Dagster run is the same result."""


def git_state(folder: Path | None = None) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether tracked files differ from it (None, None: no git)."""
    here = Path(folder) if folder is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        if commit is None:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=here, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, bool(status.stdout.strip()) if status.returncode == 0 else None


_OPENED: set[tuple[str, str]] = set()
"""The (store, experiment) pairs this process has opened for its trainers."""


def trainer_environment(tracking: TrackingSettings, output_dir: str | Path,
                        tags: Mapping[str, str]) -> dict[str, str]:
    """The variables transformers' MLflow callback reads (TRL's ``report_to="mlflow"``), for
    the training process: the same store and experiment as the runs table's runs, and
    ``tags`` (profile, task, adapter) on the trainer's run of per-step logs. Empty when
    tracking is off, so nothing is set and MLflow is never looked up.

    The store is opened here, when the step builds its first training request, before anything
    trains (once per process and store: ``_OPENED``), so a bad ``tracking.tracking_uri``
    fails the step naming it, not the trainer with a bare library error."""
    if not tracking.mlflow:
        return {}
    opened = (tracking.uri(output_dir), tracking.experiment)
    if opened not in _OPENED:
        open_tracking(tracking, output_dir)
        _OPENED.add(opened)
    return {"MLFLOW_TRACKING_URI": tracking.uri(output_dir),
            "MLFLOW_EXPERIMENT_NAME": tracking.experiment,
            "MLFLOW_TAGS": json.dumps(dict(tags)),
            "HF_MLFLOW_LOG_ARTIFACTS": "FALSE"}  # the adapter stays in the output folder


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def row_key(row: Mapping[str, Any], source: Source) -> str:
    """The content key of one row's run: profile, output folder, commit and every value."""
    payload = {"profile": source.profile, "output_dir": source.output_dir,
               "commit": source.commit, "row": {k: _plain(v) for k, v in row.items()}}
    text = json.dumps(payload, sort_keys=True, default=str, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


@dataclass(frozen=True)
class RunContent:
    """What one row's MLflow run holds (``row_content``)."""

    name: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]


def row_content(row: Mapping[str, Any], source: Source) -> RunContent:
    """One row as an MLflow run's name, tags, params and metrics (pure: no MLflow needed).

    Params are the hyperparameters the row has (a setting its method lacks is left out, not
    logged as "None"); metrics every finite number; ``pass@k`` columns by their own k."""
    tags = {f"{TAG_PREFIX}profile": source.profile,
            f"{TAG_PREFIX}output_dir": source.output_dir,
            KEY_TAG: row_key(row, source)}
    if source.commit is not None:
        tags["mlflow.source.git.commit"] = source.commit  # the UI's own commit column
        tags[f"{TAG_PREFIX}commit"] = source.commit
    if source.dirty is not None:
        tags[f"{TAG_PREFIX}dirty"] = str(source.dirty).lower()
    for column in ROW_TAGS:
        value = row.get(column)
        if value is not None:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            tags[f"{TAG_PREFIX}{metric_name(column)}"] = text
    tags.update(source.extra_tags)
    params = {column: str(row[column]) for column in HYPERPARAMETERS
              if row.get(column) is not None}
    columns = [*ROW_METRICS, *(c for c in row if c.startswith(("pass@", "Δ pass@"))
                               and c not in ROW_METRICS)]
    metrics = {metric_name(c): float(row[c]) for c in columns if _finite(row.get(c))}
    return RunContent(str(row["adapter"]), tags, params, metrics)


@dataclass
class Logged:
    """What ``log_rows`` did: the store (as shown: its password hidden), the experiment and
    each row's fate by adapter."""

    uri: str
    experiment_id: str
    logged: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{len(self.logged)} run(s) logged ({len(self.replaced)} replacing unfinished "
                f"ones), {len(self.unchanged)} unchanged")


def _client_class() -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise TrackingError(f"tracking.mlflow is on but MLflow is not installed ({err}): "
                            f"{MLFLOW_EXTRA}, or set tracking.mlflow: false") from None
    return MlflowClient


@dataclass(frozen=True)
class TrackingStore:
    """An opened MLflow store: its URI, the experiment's id there, and the client."""

    uri: str
    experiment: str
    experiment_id: str
    client: Any = field(repr=False, compare=False)

    @property
    def shown(self) -> str:
        """The URI as logs, metadata and messages show it: its password hidden."""
        return redact_uri(self.uri)


def _failure(err: Exception) -> tuple[str, BaseException | None]:
    """A library's error as a message may quote it (password hidden), and the cause to chain
    to ours: none when any error in its chain quotes a password, since Dagster records every
    cause's message with the step's failure."""
    reason = f"{type(err).__name__}: {err}"
    link: BaseException | None = err
    walked: set[int] = set()
    while link is not None and id(link) not in walked:  # a chain may loop
        if redact_text(str(link)) != str(link):
            return redact_text(reason), None
        walked.add(id(link))
        link = link.__cause__ or link.__context__
    return reason, err


def open_store(uri: str, experiment: str, default: bool = False) -> TrackingStore:
    """Open the store at ``uri`` and find (or create) ``experiment`` in it: the one place a
    store is reached first, so whatever stops it (a folder that cannot be made, a server
    that does not answer, a database that will not open) is a ``TrackingError`` naming
    ``tracking.tracking_uri``, its value and the reason. ``default``: the URI is the
    profile's default (``tracking_uri`` unset), which the message says."""
    client_class = _client_class()
    try:
        client = client_class(tracking_uri=uri)
        experiment_id = _experiment_id(client, experiment, uri)
    except Exception as err:  # any library's error: named with the setting that caused it
        value = f"{redact_uri(uri)!r}" + (" (unset: the default store in the output folder)"
                                          if default else "")
        reason, cause = _failure(err)
        raise TrackingError(
            f"{URI_SETTING} = {value}: the MLflow store cannot be opened ({reason}); set "
            f"{URI_SETTING} to a store this machine can reach and write (sqlite:/// in a "
            "writable folder, a folder, or a server), or tracking.mlflow: false") from cause
    return TrackingStore(uri, experiment, experiment_id, client)


def open_tracking(tracking: TrackingSettings, output_dir: str | Path) -> TrackingStore:
    """The profile's store (``tracking.uri``) opened (``open_store``)."""
    return open_store(tracking.uri(output_dir), tracking.experiment,
                      default=tracking.tracking_uri is None)


def _artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite store's file; elsewhere
    the store's own default (a folder store keeps them inside; a server decides)."""
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "mlflow-artifacts").as_uri()
    return None


def _experiment_id(client: Any, name: str, uri: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name, artifact_location=_artifact_root(uri))
    except Exception:  # another task's asset created it first
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def _existing(client: Any, experiment_id: str, source: Source, task: str) -> Iterator[Any]:
    """The active runs this profile and task logged before, page by page."""
    query = (f"tags.`{TAG_PREFIX}profile` = '{source.profile}' and "
             f"tags.`{TAG_PREFIX}task` = '{task}'")
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=query, max_results=1000,
                                  page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _log_one(client: Any, experiment_id: str, row: Mapping[str, Any],
             content: RunContent) -> None:
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(experiment_id, run_name=content.name, tags=content.tags)
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in
                                          content.metrics.items()],
                         params=[Param(k, v) for k, v in content.params.items()],
                         tags=[RunTag("mlflow.runName", content.name)])
        client.log_text(run_id, json.dumps({k: _plain(v) for k, v in row.items()}, indent=1,
                                           ensure_ascii=False), ROW_ARTIFACT)
        folder = row.get("adapter_path")
        for name in ADAPTER_ARTIFACTS if folder else ():
            path = Path(folder) / name
            if path.is_file():
                client.log_artifact(run_id, str(path))
    except BaseException:
        client.set_terminated(run_id, "FAILED")  # replaced by the next logging of the row
        raise
    client.set_terminated(run_id, "FINISHED")


def log_rows(rows: Sequence[Mapping[str, Any]], store: TrackingStore | str, experiment: str,
             source: Source) -> Logged:
    """Log each row (one task's runs table, ``frame.to_dicts()``) as an MLflow run in
    ``store`` (opened by ``open_store``; a URI is opened here) in ``experiment``, skipping
    rows already logged and finished (``row_key``)."""
    if isinstance(store, str):
        store = open_store(store, experiment)
    try:
        return _log_rows(rows, store, source)
    except TrackingError:
        raise
    except Exception as err:  # the store failed part-way: said without its password
        reason, cause = _failure(err)
        raise TrackingError(f"logging to the MLflow store {store.shown} ({URI_SETTING}) "
                            f"failed: {reason}") from cause


def _log_rows(rows: Sequence[Mapping[str, Any]], store: TrackingStore,
              source: Source) -> Logged:
    """``log_rows``' work, whose library errors it words."""
    client, experiment_id = store.client, store.experiment_id
    tasks = {str(r["task"]) for r in rows}
    by_key: dict[str, list[Any]] = {}
    for task in sorted(tasks):
        for run in _existing(client, experiment_id, source, task):
            by_key.setdefault(run.data.tags.get(KEY_TAG, ""), []).append(run)
    done = Logged(store.shown, experiment_id)
    for row in rows:
        content = row_content(row, source)
        earlier = by_key.get(content.tags[KEY_TAG], [])
        if any(run.info.status == "FINISHED" for run in earlier):
            done.unchanged.append(content.name)
            continue
        for run in earlier:  # unfinished (a crash mid-logging): replaced, not duplicated
            client.delete_run(run.info.run_id)
        _log_one(client, experiment_id, row, content)
        done.logged.append(content.name)
        if earlier:
            done.replaced.append(content.name)
    return done
