"""Issue 13.8: no two assets share a file, an adapter folder or a stage folder.

Experiment names carry sweep values (``rrhf_self_judge_lambda0.01``,
``dpo_self_judge_beta0.3_lr5e-06``); a path built with ``with_suffix`` cut them at the dot, so
under ``paper`` the λ = 0, 0.01 and 0.5 reports (Figure 6) and the β = 0.3 / 0.5 reports
(Table 9) each landed in one file. Every path here comes from the function the code itself
uses, for every shipped profile.
"""

import re
from collections import Counter
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets import profile_assets
from assets._adapter_files import adapter_curves_png, adapter_dir, adapter_work_dir
from assets._stages import open_store, stage_folder
from resources import ExperimentLocation, ExperimentResource, ParquetIOManager
from resources.parquet_io import FILE_KEY, FOLDER_KEY, asset_file, schema_metadata
from saturated_dag.experiments import (
    SUFFIX,
    SWITCHES,
    Experiment,
    experiment_matrix,
    number_text,
    task_cells,
)
from saturated_dag.infra.shards import stage_dir, stage_key
from saturated_dag.profiles import available_profiles, load_profile
from tests.scoring_data import eval_report

OUT = Path("/out")
# the assets whose compute opens a shard store, named by their own key (``open_store``'s stage)
STORE_ASSETS = {"generation_pool", "entropy_scores", "self_judge_scores", "strong_judge_scores"}


def _assets(profile: str) -> list[dg.AssetsDefinition]:
    """The assets ``definitions.py`` builds for ``profile``."""
    assets, _ = profile_assets(load_profile(profile))
    return [a for a in assets if a.is_executable]


def _duplicates(paths: list[Path]) -> dict[Path, int]:
    return {p: n for p, n in Counter(paths).items() if n > 1}


def _asset_files(assets: list[dg.AssetsDefinition]) -> list[Path]:
    """Every file the Parquet IO manager writes, one per (asset, partition)."""
    files: list[Path] = []
    for asset in assets:
        for key in asset.keys:
            if asset.get_io_manager_key_for_asset_key(key) != "parquet_io":
                continue
            partitions = asset.partitions_def.get_partition_keys() if asset.partitions_def \
                else [None]
            files += [asset_file(OUT / "assets", key.path, p) for p in partitions]
    return files


def _adapter_paths(profile: str) -> list[Path]:
    settings = load_profile(profile)
    paths: list[Path] = []
    for task in settings.tasks:
        for exp in task_cells(settings, task):
            paths += [f(str(OUT), task, exp)
                      for f in (adapter_dir, adapter_work_dir, adapter_curves_png)]
    return paths


def _stages(assets: list[dg.AssetsDefinition]) -> list[str]:
    """The stage name of every store-opening asset: its key joined by ``/``."""
    return ["/".join(k.path) for a in assets for k in a.keys
            if k.path[-1] in STORE_ASSETS or "eval" in k.path[:-1]]


@pytest.mark.parametrize("profile", available_profiles())
def test_every_asset_file_adapter_folder_and_stage_folder_is_distinct(profile: str) -> None:
    assets = _assets(profile)
    files, adapters, stages = _asset_files(assets), _adapter_paths(profile), _stages(assets)
    evals = [k for a in assets for k in a.keys if "eval" in k.path[:-1]]
    tasks = load_profile(profile).tasks
    cells = sum(len(task_cells(load_profile(profile), t)) for t in tasks)
    assert len(evals) == len(tasks) + cells  # one base report per task, one per adapter
    assert len(stages) == len(evals) + len(tasks) * len(STORE_ASSETS)

    folders = [OUT / "stages" / stage_folder(s) for s in stages]
    everything = [*files, *adapters, *folders]
    assert not _duplicates(everything), _duplicates(everything)
    # no file is also a folder above another path (a file/folder clash)
    parents = {parent for p in everything for parent in p.parents}
    assert not parents & {*files, *(p for p in adapters if p.suffix == ".png")}
    # the key folder hashes the stage name: same settings and data, another asset, another key
    keys = [stage_key(s, "2", {"same": 1}, {"data": "same"}) for s in stages]
    assert len(set(keys)) == len(keys)


def test_paper_sweeps_have_one_eval_report_file_per_setting() -> None:
    """The collisions the issue names: λ 0 / 0.01 / 0.5 and the six β ∈ {0.3, 0.5} cells."""
    files = {tuple(k.path): asset_file(OUT, k.path) for a in _assets("paper") for k in a.keys
             if "eval" in k.path[:-1]}
    names = [p.name for k, p in files.items() if k[:2] == ("chain_sum", "hard")]
    for name in ("rrhf_self_judge_lambda0.parquet", "rrhf_self_judge_lambda0.01.parquet",
                 "rrhf_self_judge_lambda0.5.parquet"):
        assert names.count(name) == 1, name
    betas = [p.name for k, p in files.items()
             if k[0] == "chain_sum" and re.search(r"_beta0\.[35](_|$)", k[-1])]
    assert len(betas) == len(set(betas)) == 6


def test_asset_file_appends_the_suffix_and_rejects_names_that_are_not_one_name() -> None:
    assert asset_file("/b", ["t", "eval", "x_lambda0.01"]) == Path("/b/t/eval/x_lambda0.01.parquet")
    assert asset_file("/b", ["t", "x"], "0.5") == Path("/b/t/x/0.5.parquet")
    for bad in (["t", ".."], ["t", "a/b"], []):
        with pytest.raises(ValueError, match="segment"):
            asset_file("/b", bad)
    with pytest.raises(ValueError, match=r"partition key '\.\./x'"):
        asset_file("/b", ["t", "x"], "../x")


@pytest.mark.parametrize("profile", available_profiles())
def test_sweep_numbers_in_names_read_back_as_their_setting(profile: str) -> None:
    for exp in experiment_matrix(load_profile(profile).training):
        parts = exp.name.split("_")
        for key, value in exp.overrides:
            if key in SWITCHES:
                continue
            (text,) = [p[len(SUFFIX[key]):] for p in parts if p.startswith(SUFFIX[key])
                       and p[len(SUFFIX[key]):][:1].isdigit()]
            assert float(text) == value, (exp.name, key, value)


def test_close_sweep_values_get_different_names() -> None:
    """``:g`` keeps six digits: two learning rates that differ in the seventh were one name."""
    assert number_text(0.01) == "0.01" and number_text(5e-06) == "5e-06" and number_text(0.0) == "0"
    a, b = 1.2345678e-05, 1.2345671e-05
    assert number_text(a) != number_text(b)
    assert float(number_text(a)) == a and float(number_text(b)) == b
    names = {Experiment("saturated", "dpo", "entropy", ("saturated", "dpo_pairs", "entropy"),
                        (("learning_rate", lr),)).name for lr in (a, b)}
    assert len(names) == 2


def _report(correct: int) -> pl.DataFrame:
    """A one-question eval report (the ``eval_report`` schema) with ``correct`` of 8."""
    return eval_report({"q": (8, correct)})


def test_dotted_keys_are_stored_and_read_back_separately(tmp_path: Path) -> None:
    """Two reports whose names differ only after a dot: each downstream read gets its own, at
    the path ``asset_file`` gives (the IO manager's ``path`` metadata says so)."""
    values = {"x_lambda0.01": 1, "x_lambda0.5": 2}

    def report(name: str, value: int) -> dg.AssetsDefinition:
        @dg.asset(key=["t", "eval", name], io_manager_key="parquet_io",
                  metadata=schema_metadata("eval_report"))
        def _report_asset() -> pl.DataFrame:
            return _report(value)

        return _report_asset

    @dg.asset(key=["t", "table"], io_manager_key="parquet_io",
              metadata=schema_metadata("eval_report"),
              ins={"a": dg.AssetIn(key=["t", "eval", "x_lambda0.01"]),
                   "b": dg.AssetIn(key=["t", "eval", "x_lambda0.5"])})
    def table(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
        return pl.concat([a, b])

    result = dg.materialize([*(report(n, v) for n, v in values.items()), table],
                            resources={"parquet_io": ParquetIOManager(location=ExperimentLocation(
        profile="demo", output_dir=str(tmp_path)))})
    assert result.success
    table_file = tmp_path / "assets" / "t" / "table.parquet"
    assert pl.read_parquet(table_file)["correct"].sum() == 3
    paths = {tuple(m.asset_key.path): tmp_path / m.materialization.metadata[FOLDER_KEY].value
             / m.materialization.metadata[FILE_KEY].value
             for m in result.get_asset_materialization_events()}
    for name, value in values.items():
        key = ("t", "eval", name)
        assert paths[key] == asset_file(tmp_path / "assets", key)
        stored = pl.read_parquet(tmp_path / "assets" / "t" / "eval" / f"{name}.parquet")
        assert stored["correct"].sum() == value


def test_a_file_from_the_old_naming_is_not_read_and_the_error_says_why(tmp_path: Path) -> None:
    """The old ``x_lambda0.parquet`` was shared by λ 0, 0.01 and 0.5: never attributed to one."""
    old = tmp_path / "assets" / "t" / "eval" / "x_lambda0.parquet"
    old.parent.mkdir(parents=True)
    _report(0).write_parquet(old)
    manager = ParquetIOManager(location=ExperimentLocation(
        profile="demo", output_dir=str(tmp_path)))
    key = dg.AssetKey(["t", "eval", "x_lambda0.01"])
    with dg.build_input_context(asset_key=key) as context, \
            pytest.raises(FileNotFoundError) as err:
        manager.load_input(context)
    text = str(err.value)
    assert str(old) in text and "old file naming" in text
    assert "re-materialise t/eval/x_lambda0.01 to write x_lambda0.01.parquet" in text
    with dg.build_input_context(asset_key=dg.AssetKey(["t", "eval", "y"])) as other, \
            pytest.raises(FileNotFoundError, match="materialise it first"):
        manager.load_input(other)


def test_open_store_uses_the_whole_stage_name_for_folder_and_key(tmp_path: Path) -> None:
    """``stages/<stage_folder(stage)>/<key>``, nothing cut at a dot, the stage in the key."""
    from types import SimpleNamespace

    experiment = ExperimentResource(location=ExperimentLocation(profile="demo",
                                                               output_dir=str(tmp_path)))
    roots, keys = [], []
    for name in ("rrhf_self_judge_lambda0.01", "rrhf_self_judge_lambda0.5"):
        asset_key = dg.AssetKey(["chain_sum", "hard", "eval", name])
        context = SimpleNamespace(asset_key=asset_key, assets_def=SimpleNamespace(
            code_versions_by_key={asset_key: "2"}))  # what open_store reads of a context
        store, key = open_store(context, experiment, {}, {})  # type: ignore[arg-type]
        assert store is not None and store.root == stage_dir(
            tmp_path, f"chain_sum__hard__eval__{name}", key)
        roots.append(store.root)
        keys.append(key)
    assert len(set(roots)) == len(set(keys)) == 2
