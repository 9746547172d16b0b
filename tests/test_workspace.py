"""Issue 47, item 2: ``dagster dev`` (``workspace.yaml``) shows the demo and the testbed in one
UI, each asset defined by one location (Dagster allows one definition per asset key in a
deployment; the testbed's runs and the demo's share the instance)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from assets import profile_assets
from locations.testbed import GROUP, build_view
from saturated_dag.profiles import load_profile

ROOT = Path(__file__).resolve().parent.parent


def test_the_workspace_loads_the_demo_and_the_testbed() -> None:
    entries = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    files = {e["python_file"]["location_name"]: e["python_file"]["relative_path"]
             for e in entries}
    assert files == {"saturated_dag": "definitions.py", "testbed": "locations/testbed.py"}
    assert all((ROOT / path).is_file() for path in files.values())


def test_the_build_view_defines_only_keys_no_other_location_does(tmp_path: Path) -> None:
    defs = build_view("testbed", str(tmp_path))
    graph = defs.resolve_asset_graph()
    own = {key.to_user_string() for key in graph.materializable_asset_keys}
    assert own == {"chain_sum/testbed_validation"}
    # the analysis's inputs (its cells' eval reports, the base model's report, the agreement
    # table, the selections) are the testbed job's: here only external inputs
    inputs = graph.get(dg.AssetKey(["chain_sum", "testbed_validation"])).parent_keys
    assert dg.AssetKey(["chain_sum", "eval", "base"]) in inputs
    assert all(not graph.get(key).is_executable for key in inputs)
    # the testbed's two data seeds: the agreement table and the difficulty partitions it
    # reads are partitioned here as in the testbed job's graph, so it reads both draws
    for name in ("scorer_agreement", "difficulty_partitions"):
        spec = graph.get(dg.AssetKey(["chain_sum", name]))
        assert spec.partitions_def is not None
        assert spec.partitions_def.get_partition_keys() == ["data0", "data1"]
    demo, _ = profile_assets(load_profile("demo"))
    demo_keys = {key.to_user_string() for a in demo if isinstance(a, dg.AssetsDefinition)
                 for key in a.keys}
    assert not own & demo_keys
    (asset,) = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)
                and a.is_executable]
    assert set(asset.group_names_by_key.values()) == {GROUP}


def test_a_profile_without_a_testbed_is_refused(tmp_path: Path) -> None:
    try:
        build_view("demo", str(tmp_path))
    except ValueError as err:
        assert "SATURATED_DAG_TESTBED_PROFILE" in str(err)
    else:
        raise AssertionError("the demo profile has no testbed")
