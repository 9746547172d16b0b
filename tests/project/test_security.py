"""Security basics: remote code stays off unless configured; a hub token in the environment,
and a password in a URI-valued setting (``tracking.tracking_uri``), never reach logs,
metadata or outputs (issue 67, item 2)."""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from resources.training import TRACKING_URI, pipes_payload
from saturated_dag.experiments import experiment_plan
from saturated_dag.infra import output_stamp
from saturated_dag.infra.redact import redact_text, redact_uri, redacted
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.tracking import TrackingError, open_store
from saturated_dag.training.request import TrainingRequest
from saturated_dag.training.resolve import adapter_request
from tests.pipeline import by_name, graph, resources
from tests.reporting.test_runs_table import OVERRIDES, _seed_inputs

SENTINEL = "hf_sentinelTOKEN0123456789abcdef"


@pytest.mark.parametrize("profile", ["demo", "ci", "paper", "paper_instruct"])
def test_remote_code_is_off_in_every_shipped_profile(profile: str) -> None:
    loaded = load_profile(profile)
    assert loaded.policy.trust_remote_code is False
    assert loaded.judges.strong.trust_remote_code is False


def test_hub_token_never_reaches_logs_metadata_or_outputs(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    overrides = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]},
                               "questions_per_cell": 2, "strict_grid": None},
                 "sampling": {"n": 2, "max_new_tokens": 4},
                 "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    keys = [dg.AssetKey(["chain_sum", "generation_pool"]),
            dg.AssetKey(["chain_sum", "difficulty_partitions"])]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(graph("demo", overrides)[0], selection=keys, instance=instance,
                            resources=resources(tmp_path / "out", "demo", overrides))
    assert result.success
    logged = [str(e) for e in instance.all_logs(result.run_id)]
    assert logged and not [line for line in logged if SENTINEL in line]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path


PASSWORD = "secret"
"""What no file, log line or event of a run may hold."""


@pytest.mark.parametrize(("value", "shown"), [
    ("postgresql://alice:secret@db.example:5432/mlflow",
     "postgresql://alice:***@db.example:5432/mlflow"),
    ("http://alice:secret@127.0.0.1:5000", "http://alice:***@127.0.0.1:5000"),
    ("mysql+pymysql://alice:se@cret@db/mlflow", "mysql+pymysql://alice:***@db/mlflow"),
    ("postgresql://db/mlflow?sslmode=require&password=secret",
     "postgresql://db/mlflow?sslmode=require&password=***"),
    ("postgresql://alice@db.example/mlflow", "postgresql://alice@db.example/mlflow"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("sqlite:////tmp/out/mlflow.db", "sqlite:////tmp/out/mlflow.db"),
    ("file:///tmp/mlruns", "file:///tmp/mlruns"),
    ("Qwen/Qwen3-1.7B", "Qwen/Qwen3-1.7B"),
    ("user:secret", "user:secret"),
    ("", ""),
])
def test_redact_uri_hides_only_the_password(value: str, shown: str) -> None:
    assert redact_uri(value) == shown


def test_redact_text_and_redacted_find_every_uri() -> None:
    message = ("API request to http://alice:secret@127.0.0.1:1/api/2.0/x failed; "
               "retry 'postgresql://bob:secret@db/m'")
    assert redact_text(message) == ("API request to http://alice:***@127.0.0.1:1/api/2.0/x "
                                    "failed; retry 'postgresql://bob:***@db/m'")
    settings = {"tracking": {"tracking_uri": "http://alice:secret@h", "mlflow": True},
                "grid": [2, "https://u:secret@h/x"], "name": "p", "seed": None}
    assert redacted(settings) == {"tracking": {"tracking_uri": "http://alice:***@h",
                                               "mlflow": True},
                                  "grid": [2, "https://u:***@h/x"], "name": "p", "seed": None}
    assert settings["tracking"]["tracking_uri"] == "http://alice:secret@h"  # a new structure


def test_the_store_gets_the_password_and_its_error_does_not_show_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real URI reaches MLflow's client; the failure names the setting without it, and
    chains no library error that quotes it (Dagster records every cause's message)."""
    given: list[str] = []

    class Client:
        def __init__(self, tracking_uri: str) -> None:
            given.append(tracking_uri)

        def get_experiment_by_name(self, name: str) -> None:
            raise ConnectionError(f"API request to {given[-1]}/api failed")

    monkeypatch.setattr("saturated_dag.reporting.tracking._client_class", lambda: Client)
    uri = "http://alice:secret@127.0.0.1:1"
    with pytest.raises(TrackingError) as caught:
        open_store(uri, "saturated-dag")
    assert given == [uri]
    message = str(caught.value)
    assert "tracking.tracking_uri = 'http://alice:***@127.0.0.1:1'" in message
    assert "ConnectionError: API request to http://alice:***@127.0.0.1:1/api" in message
    assert PASSWORD not in message and caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_a_stamp_written_with_a_password_is_shown_and_rewritten_without_it(
        tmp_path: Path) -> None:
    """A ``settings.json`` from before passwords were hidden: the run's "settings changed"
    lines never quote it, and the stamp is rewritten without it."""
    dump = load_profile("demo", {"tracking": {"tracking_uri": "http://alice:secret@h:1"}}
                        ).model_dump()
    stamp = tmp_path / output_stamp.STAMP
    assert output_stamp.claim(tmp_path, "demo", dump) == []
    assert PASSWORD not in stamp.read_text() and "alice:***@h:1" in stamp.read_text()
    old = json.loads(stamp.read_text())
    old["settings"]["tracking"]["tracking_uri"] = "http://alice:secret@h:1"  # as written before
    stamp.write_text(json.dumps(old))
    moved = load_profile("demo", {"tracking": {"tracking_uri": "http://alice:secret@h:2"}})
    assert output_stamp.claim(tmp_path, "demo", moved.model_dump()) == [
        "tracking.tracking_uri: 'http://alice:***@h:1' -> 'http://alice:***@h:2'"]
    assert PASSWORD not in stamp.read_text()
    stamp.write_text(json.dumps(old))  # the same settings: nothing to say, but healed
    assert output_stamp.claim(tmp_path, "demo", dump) == []
    assert PASSWORD not in stamp.read_text()


def test_pipes_carries_no_password_and_the_child_still_gets_the_store(
        tmp_path: Path) -> None:
    """Pipes writes its extras to a file under the output folder: the password goes to the
    training child in its environment instead, where the trainer's MLflow callback reads it."""
    uri = "http://alice:secret@127.0.0.1:1"
    profile = load_profile("demo", {"tracking": {"mlflow": True, "tracking_uri": uri}})
    request = adapter_request(
        profile, "chain_sum", experiment_plan(profile)["chain_sum"].adapters[0], profile.policy,
        Path("d"), Path("x"), "k",
        {TRACKING_URI: uri, "MLFLOW_EXPERIMENT_NAME": "saturated-dag"})
    payload, env = pipes_payload([request])
    assert PASSWORD not in json.dumps(payload) and env == {TRACKING_URI: uri}
    (received,) = [TrainingRequest.from_json(json.dumps(data)) for data in payload]
    assert received.tracking_env == {"MLFLOW_EXPERIMENT_NAME": "saturated-dag"}
    assert received.report_to == "mlflow"  # the trainer still reports to the store
    plain = request.model_copy(update={"tracking_env": {TRACKING_URI: "sqlite:///x.db"}})
    assert pipes_payload([plain]) == ([plain.model_dump(mode="json")], {})  # nothing to hide


def _tracked_profile(folder: Path, uri: str) -> Path:
    """A profile file over ``demo`` whose MLflow store is ``uri``, as a user would write it."""
    path = folder / "tracked.yaml"
    path.write_text("extends: demo\nname: tracked\n"
                    f"tracking:\n  mlflow: true\n  tracking_uri: '{uri}'\n")
    return path


def _runs_table(profile: Path, out: Path, instance: dg.DagsterInstance) -> Any:
    everything, _ = graph(str(profile), OVERRIDES)
    (table,) = by_name(everything, "chain_sum", "runs_table")
    return dg.materialize(everything, selection=[table.key], instance=instance,
                          resources=resources(out, str(profile), OVERRIDES),
                          raise_on_error=False)


def _event_texts(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Every event of the run as stored: its message, its data (metadata included) and a
    step's error with every cause."""
    texts = []
    for entry in instance.all_logs(run_id):
        texts.append(entry.message or "")
        event = entry.dagster_event
        if event is not None:
            texts.append(repr(event.event_specific_data))
            if event.is_step_failure:
                texts.append(event.step_failure_data.error.to_string())
    return texts


def test_a_password_in_the_tracking_uri_reaches_no_file_log_or_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 67, item 2: ``tracking.tracking_uri`` with ``user:secret@`` in a profile file.
    Two runs of the runs table on a persistent instance (its own ``DAGSTER_HOME``): each
    stamps the output folder, the second with the store moved, so the run logs the changed
    setting, and each opens the store, a server that is not there, so the step fails naming
    it. No file of the output folder or the instance, no event and no line on the console
    holds the password; the messages show ``alice:***@``."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # refused at once, no backoff
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    home, out = tmp_path / "dagster_home", tmp_path / "out"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    _seed_inputs(out)
    texts: list[str] = []
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        for port in (1, 2):
            profile = _tracked_profile(tmp_path, f"http://alice:secret@127.0.0.1:{port}")
            result = _runs_table(profile, out, instance)
            assert not result.success
            texts += _event_texts(instance, result.run_id)
    leaked = [text for text in texts if PASSWORD in text]
    assert not leaked, leaked[:3]
    assert any("tracking.tracking_uri = 'http://alice:***@127.0.0.1:2': the MLflow store "
               "cannot be opened" in text for text in texts)
    assert any("settings changed since this folder's last run" in text
               and "'http://alice:***@127.0.0.1:1' -> 'http://alice:***@127.0.0.1:2'" in text
               for text in texts)
    console = capfd.readouterr()
    assert PASSWORD not in console.out and PASSWORD not in console.err
    stamp = json.loads((out / output_stamp.STAMP).read_text())
    assert stamp["settings"]["tracking"]["tracking_uri"] == "http://alice:***@127.0.0.1:2"
    files = [p for folder in (out, home) for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in files)  # the instance's stores were searched too
    assert not [p for p in files if PASSWORD.encode() in p.read_bytes()]
