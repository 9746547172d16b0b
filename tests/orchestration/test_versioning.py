"""Code versions derived from the imported source: an edit changes exactly its importers.

A synthetic package in ``tmp_path`` pins down the rules (function-level, relative and
submodule imports, ``python -m`` strings, ``TYPE_CHECKING``, package ``__init__`` files) and
which of them grimp covers and which ``string_imports`` adds; the real graph is then checked
by simulating edits through the source reader, without touching a file.
"""

from pathlib import Path

import dagster as dg
import pytest

from assets.versioning import (
    PROJECT_ROOT,
    SourceReader,
    SourceTree,
    code_version_for,
    code_version_of,
    code_versions,
    compute_module,
    string_imports,
    with_code_versions,
)

PACKAGE = {
    # the registry imports every module, as assets/__init__.py does
    "pkg/__init__.py": "from pkg.registry import ALL\n",
    "pkg/registry.py": "from pkg import a, b, c\nALL = [a, b, c]\n",
    "pkg/a.py": (
        "from typing import TYPE_CHECKING\n"
        "from pkg.core import util\n"           # a submodule: pkg/core/__init__.py not counted
        "if TYPE_CHECKING:\n"
        "    from pkg import typing_only\n"     # never runs
        "def run():\n"
        "    from pkg.lazy import work\n"       # a function-level import
        "    return work()\n"
    ),
    "pkg/b.py": (
        "import subprocess, sys\n"
        "from pkg.core import helper\n"         # a name pkg/core/__init__.py re-exports
        "def launch():\n"
        "    subprocess.run([sys.executable, '-m', 'pkg.child'])\n"  # runs pkg/child.py
    ),
    "pkg/c.py": "import json\nfrom . import lazy\n",   # relative
    "pkg/core/__init__.py": "from .helpers import helper\n",
    "pkg/core/helpers.py": "def helper():\n    return 1\n",
    "pkg/core/util.py": "X = 1\n",
    "pkg/lazy.py": "def work():\n    return 2\n",
    "pkg/child.py": "print('child')\n",
    "pkg/typing_only.py": "T = int\n",
    "pkg/unused.py": "U = 0\n",
}
ASSET_MODULES = ("pkg.a", "pkg.b", "pkg.c")
# which of the asset modules each file's edit must re-version
EXPECTED = {
    "pkg/__init__.py": set(),
    "pkg/registry.py": set(),
    "pkg/a.py": {"pkg.a"},
    "pkg/b.py": {"pkg.b"},
    "pkg/c.py": {"pkg.c"},
    "pkg/core/__init__.py": {"pkg.b"},
    "pkg/core/helpers.py": {"pkg.b"},
    "pkg/core/util.py": {"pkg.a"},
    "pkg/lazy.py": {"pkg.a", "pkg.c"},
    "pkg/child.py": {"pkg.b"},
    "pkg/typing_only.py": set(),
    "pkg/unused.py": set(),
}


def _edited(edit: str, root: Path | None = None) -> SourceReader:
    """A source reader that sees one file edited (a comment appended)."""
    def read(path: Path) -> bytes:
        data = path.read_bytes()
        relative = path.relative_to(root or PROJECT_ROOT).as_posix()
        return data + b"\n# edited\n" if relative == edit else data
    return read


@pytest.fixture
def package(tmp_path: Path) -> Path:
    for relative, source in PACKAGE.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source)
    return tmp_path


def test_closure_follows_the_import_rules(package: Path) -> None:
    tree = SourceTree(package, ["pkg"])
    assert tree.files("pkg.a") == ["pkg/a.py", "pkg/core/util.py", "pkg/lazy.py"]
    assert tree.files("pkg.b") == ["pkg/b.py", "pkg/child.py", "pkg/core/__init__.py",
                                   "pkg/core/helpers.py"]
    assert tree.files("pkg.c") == ["pkg/c.py", "pkg/lazy.py"]
    # the registry depends on every asset module, but no asset module on the registry
    assert {"pkg.a", "pkg.b", "pkg.c"} <= set(tree.closure("pkg.registry"))


@pytest.mark.parametrize("edit", sorted(EXPECTED))
def test_an_edit_changes_exactly_the_modules_that_import_it(package: Path, edit: str) -> None:
    before = SourceTree(package, ["pkg"])
    after = SourceTree(package, ["pkg"], read=_edited(edit, package))
    changed = {m for m in ASSET_MODULES if before.version(m) != after.version(m)}
    assert changed == EXPECTED[edit]


def test_version_covers_paths_too(package: Path) -> None:
    """The same bytes under another name are another version (a moved module is new code)."""
    before = SourceTree(package, ["pkg"]).version("pkg.a")
    (package / "pkg" / "core" / "util.py").rename(package / "pkg" / "core" / "util2.py")
    (package / "pkg" / "a.py").write_text(PACKAGE["pkg/a.py"].replace("util", "util2"))
    after = SourceTree(package, ["pkg"]).version("pkg.a")
    assert before != after


def test_grimp_walks_the_graph_and_only_the_string_rule_is_ours(
        package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """grimp's own graph has every edge but the ``python -m`` string's, and represents
    ``from pkg.core import util`` as an import of the submodule only (the package-``__init__``
    rule); ``string_imports`` adds exactly the edge grimp cannot see."""
    import grimp

    monkeypatch.syspath_prepend(str(package))
    plain = grimp.build_graph("pkg", exclude_type_checking_imports=True, cache_dir=None)
    ours = SourceTree(package, ["pkg"]).graph
    assert plain.find_modules_directly_imported_by("pkg.a") == {"pkg.core.util", "pkg.lazy"}
    assert plain.find_modules_directly_imported_by("pkg.b") == {"pkg.core"}
    assert ours.find_modules_directly_imported_by("pkg.b") == {"pkg.core", "pkg.child"}
    for module in plain.modules - {"pkg.b"}:
        assert (ours.find_modules_directly_imported_by(module)
                == plain.find_modules_directly_imported_by(module)), module
    modules = set(plain.modules)
    assert string_imports(b"x = 'pkg.child'\ny = 'pkg'\n# 'pkg.lazy'\n", modules) == {"pkg.child"}


def test_an_import_of_a_missing_module_counts_its_package(package: Path) -> None:
    """grimp resolves ``import pkg.nowhere`` to ``pkg``, the nearest module that exists: the
    version covers ``pkg/__init__.py`` (and Python fails on the import itself)."""
    (package / "pkg" / "a.py").write_text("import pkg.nowhere\n")
    assert "pkg/__init__.py" in SourceTree(package, ["pkg"]).files("pkg.a")
    with pytest.raises(ModuleNotFoundError, match=r"pkg\.nowhere is not a module"):
        SourceTree(package, ["pkg"]).version("pkg.nowhere")


# --- the real graph --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_assets() -> list[dg.AssetsDefinition]:
    """The demo profile's graph as the code location builds it (``assets.profile_assets``)."""
    from tests.pipeline import graph

    return [a for a in graph("demo")[0]
            if isinstance(a, dg.AssetsDefinition) and a.is_executable]


def _changed_by(edit: str, assets: list[dg.AssetsDefinition]) -> set[dg.AssetKey]:
    assert (PROJECT_ROOT / edit).is_file(), edit
    before = code_versions(assets, SourceTree())
    after = code_versions(assets, SourceTree(read=_edited(edit)))
    return {k for k in before if before[k] != after[k]}


def _kind(key: dg.AssetKey) -> str:
    return key.path[-1]


def test_the_graph_carries_the_derived_versions(real_assets) -> None:
    derived = code_versions(real_assets)
    for a in real_assets:
        for key in a.keys:
            assert a.code_versions_by_key[key] == derived[key], key.to_user_string()
            assert len(derived[key]) == 16


def test_editing_the_selection_scorer_changes_its_importers_only(real_assets) -> None:
    changed = _changed_by("saturated_dag/scorers/scored_completions.py", real_assets)
    kinds = {_kind(k) for k in changed}
    assert {"self_judge_scores", "entropy_scores", "strong_judge_scores",
            "scorer_agreement"} <= kinds
    assert not kinds & {"generation_pool", "difficulty_partitions", "base_model"}
    for a in real_assets:  # and exactly the assets whose imports reach it
        reaches = ("saturated_dag/scorers/scored_completions.py"
                   in SourceTree().files(compute_module(a)))
        assert all((k in changed) == reaches for k in a.keys), a.keys


def test_editing_the_losses_retrains_adapters_but_resamples_nothing(real_assets) -> None:
    changed = _changed_by("saturated_dag/training/losses.py", real_assets)
    adapters = {k for a in real_assets for k in a.keys if "adapter" in k.path[:-1]}
    assert adapters and adapters <= changed
    assert not {_kind(k) for k in changed} & {"generation_pool", "difficulty_partitions"}


def test_the_fork_servers_preloaded_module_is_in_the_executors_closure() -> None:
    """``jobs/executor.py`` names ``"jobs.step_server"`` in a string only (the string rule)."""
    assert "jobs.step_server" in SourceTree().closure("jobs.executor")


def test_editing_the_asset_registry_changes_no_asset(real_assets) -> None:
    """assets/__init__.py imports every asset module; importing a submodule of it is not
    importing it, so editing it re-versions nothing."""
    assert _changed_by("assets/__init__.py", real_assets) == set()


def test_code_version_of_returns_the_running_assets_version(tmp_path: Path) -> None:
    @dg.asset
    def probe(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"version": code_version_of(context)})

    tree = SourceTree(PROJECT_ROOT, ["tests", "assets", "resources", "saturated_dag", "jobs"])
    (versioned,) = with_code_versions([probe], tree)
    result = dg.materialize([versioned])
    (event,) = result.get_asset_materialization_events()
    recorded = event.materialization.metadata["version"].value
    assert recorded == code_version_for(probe, tree) == tree.version(__name__)

    unversioned = dg.materialize([probe], raise_on_error=False)
    assert not unversioned.success
    failure = unversioned.get_step_failure_events()[0].event_specific_data.error.message
    assert "probe has no code version" in failure


# --- the base model: an observable source versioned by its files ------------------------------

def _observe(tmp_path: Path, overrides: dict | None = None) -> dg.AssetObservation:
    from assets.base_model import base_model
    from tests.pipeline import resources

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([base_model], selection=[base_model.key], instance=instance,
                            resources=resources(tmp_path / "out", "demo", overrides))
    assert result.success and not result.get_asset_materialization_events()
    (record,) = instance.fetch_observations(dg.AssetKey("base_model"), limit=5).records
    return record.event_log_entry.asset_observation


def test_base_model_is_observed_with_its_files_hash_as_data_version(tmp_path: Path) -> None:
    from assets.base_model import base_model
    from saturated_dag.generation.models import resolve
    from saturated_dag.infra.shards import file_fingerprint

    assert base_model.is_observable and not base_model.is_materializable
    observation = _observe(tmp_path)
    folder = Path(resolve("arith-base").location)
    assert observation.tags["dagster/data_version"] == file_fingerprint(folder)
    meta = {k: v.value for k, v in observation.metadata.items()}
    assert meta["model"] == "arith-base" and meta["kind"] == "folder"
    assert meta["location"] == str(folder) and meta["backend"] == "transformers"
    assert meta["pretraining_steps"] > 0 and meta["parameters"] > 0


def test_base_model_hub_id_is_versioned_by_its_name(tmp_path: Path) -> None:
    import hashlib

    observation = _observe(tmp_path, {"policy": {"model": "Qwen/Qwen3-1.7B-Base"}})
    digest = hashlib.sha256(b"Qwen/Qwen3-1.7B-Base").hexdigest()[:16]
    assert observation.tags["dagster/data_version"] == "hub:" + digest
    assert observation.metadata["kind"].value == "hub"
