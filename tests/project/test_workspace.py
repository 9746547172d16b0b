"""Issue 47, item 2: ``dagster dev`` (``workspace.yaml``) shows the demo, the testbed and the
study in one UI over one instance. Each location is its profile's whole graph, and the
testbed's and the study's keys start with their profile's ``key_prefix``, so no asset key is
defined twice in the deployment and no profile's run overwrites another's latest result."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from assets import profile_assets
from assets._keys import located
from jobs.location import build_defs
from jobs.nightly import eval_targets
from locations import extra_location
from resources import make_resources
from resources.parquet_io import schema_metadata
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT as ROOT

LOCATIONS = {"saturated_dag": "definitions.py", "testbed": "locations/testbed.py",
             "study": "locations/study.py"}


def test_the_workspace_loads_the_demo_the_testbed_and_the_study() -> None:
    entries = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    files = {e["python_file"]["location_name"]: e["python_file"]["relative_path"]
             for e in entries}
    assert files == LOCATIONS
    assert all((ROOT / path).is_file() for path in files.values())


def _keys(defs: dg.Definitions) -> set[str]:
    graph = defs.resolve_asset_graph()
    return {key.to_user_string() for key in graph.get_all_asset_keys()}


def test_no_asset_key_is_in_two_locations(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped profiles as they are (the defaults): the demo's keys start with the task,
    the testbed's with ``testbed/``, the study's with ``study/``, and every key of each
    location, its dependencies included, is its own."""
    for name in ("testbed", "study"):
        monkeypatch.delenv(f"SATURATED_DAG_{name.upper()}_PROFILE", raising=False)
        monkeypatch.setenv(f"SATURATED_DAG_{name.upper()}_OUTPUT_DIR", str(tmp_path / name))
    demo = _keys(build_defs("demo", str(tmp_path / "demo")))
    testbed = _keys(extra_location("testbed", "unused"))
    study = _keys(extra_location("study", "unused"))
    assert "chain_sum/results_table" in demo and "base_model" in demo
    assert "testbed/chain_sum/testbed_validation" in testbed
    assert "study/chain_sum/results_table" in study
    assert all(key.startswith("testbed/") for key in testbed)
    assert all(key.startswith("study/") for key in study)
    assert not any(key.startswith(("testbed/", "study/")) for key in demo)
    # the UI's Lineage lists groups by name across locations: each profile's are its own
    groups = {name: {graph.get(key).group_name for key in graph.get_all_asset_keys()}
              for name, graph in (("testbed", extra_location("testbed", "unused")
                                   .resolve_asset_graph()),
                                  ("study", extra_location("study", "unused")
                                   .resolve_asset_graph()))}
    assert all(group.startswith(name) for name, found in groups.items() for group in found)
    assert "testbed" in groups["testbed"] and "study_chain_sum_hard" in groups["study"]


def test_an_extra_location_starts_its_nightly_schedule_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SATURATED_DAG_TESTBED_OUTPUT_DIR", str(tmp_path))
    extra = extra_location("testbed", "unused")
    demo = build_defs("demo", str(tmp_path / "demo"))
    status = {name: defs.resolve_schedule_def("nightly_evaluation").default_status
              for name, defs in (("testbed", extra), ("demo", demo))}
    assert status == {"testbed": dg.DefaultScheduleStatus.STOPPED,
                      "demo": dg.DefaultScheduleStatus.RUNNING}


def test_a_profile_without_a_key_prefix_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SATURATED_DAG_TESTBED_PROFILE", "demo")
    with pytest.raises(ValueError, match=r"SATURATED_DAG_TESTBED_PROFILE='demo'.*key_prefix"):
        extra_location("testbed", "unused")


def test_the_prefixed_graph_keeps_every_dependency_and_check() -> None:
    """The prefix moves every key, input and check: the prefixed graph is the unprefixed one
    with ``testbed/`` in front of each key."""
    profile = load_profile("testbed")
    bare = profile.model_copy(update={"key_prefix": None})
    prefixed, checks = profile_assets(profile)
    plain, plain_checks = profile_assets(bare)

    def edges(assets: list) -> set[tuple[str, str]]:
        return {(dep.asset_key.to_user_string(), spec.key.to_user_string())
                for a in assets if isinstance(a, dg.AssetsDefinition) for spec in a.specs
                for dep in spec.deps}

    assert edges(prefixed) == {(f"testbed/{a}", f"testbed/{b}") for a, b in edges(plain)}
    assert ({(c.asset_key.to_user_string(), c.name) for d in checks for c in d.check_keys}
            == {(f"testbed/{c.asset_key.to_user_string()}", c.name)
                for d in plain_checks for c in d.check_keys})


def test_jobs_and_the_nightly_schedule_select_the_prefixed_keys(tmp_path: Path) -> None:
    """Every job of the testbed's location selects assets of its own graph (a selection of
    an unprefixed key would fail to resolve or select nothing), and the nightly schedule
    asks for keys of that graph."""
    defs = build_defs("testbed", str(tmp_path))
    graph = defs.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    for job in defs.resolve_all_job_defs():
        if job.name.startswith("__") or job.name == "pretrain_base_model":
            continue
        selected = job.asset_layer.selected_asset_keys
        assert selected, job.name
        assert selected <= keys, job.name
    profile = load_profile("testbed")
    targets = eval_targets(profile)
    assert targets and all(t.key in keys and set(t.upstream) <= keys for t in targets)
    assert located(profile, "base_model") == dg.AssetKey(["testbed", "base_model"])


def test_files_keep_the_unprefixed_layout(tmp_path: Path) -> None:
    """A prefixed location stores a frame where an unprefixed one would (its output folder is
    the profile's own, and ``scripts/testbed_report.py`` reads it there), reads it back, and
    refuses a key of another prefix."""
    frame = pl.DataFrame({"question_id": ["q"], "sample_index": [0], "prompt": ["1+1"],
                          "completion": ["2"]})
    io = make_resources("testbed", str(tmp_path))["parquet_io"]
    key = ["testbed", "chain_sum", "saturated", "sft_set"]

    @dg.asset(key=key, io_manager_key="parquet_io", metadata=schema_metadata("sft_set"))
    def written() -> pl.DataFrame:
        return frame

    @dg.asset(key=["testbed", "chain_sum", "read_back"], ins={"sft": dg.AssetIn(key=key)})
    def read_back(sft: pl.DataFrame) -> None:
        assert sft.height == 1

    assert dg.materialize([written, read_back], resources={"parquet_io": io}).success
    assert (tmp_path / "assets" / "chain_sum" / "saturated" / "sft_set.parquet").is_file()
    assert not (tmp_path / "assets" / "testbed").exists()
    stranger = dg.AssetKey(["study", "chain_sum", "saturated", "sft_set"])
    with dg.build_input_context(asset_key=stranger) as context, \
            pytest.raises(ValueError, match=r"not an asset of this location.*testbed/"):
        io.load_input(context)
