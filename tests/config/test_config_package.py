"""``saturated_dag.config`` as a package: every name the code imports from it is there, every
shipped profile loads, and the one list of sweeps and of scorers (``config/profile.py``) is
what the profiles and the graph read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import saturated_dag.config as config
from saturated_dag.config import SWEEPS, Profile, SweepSettings, configured_sweeps
from saturated_dag.experiments import SWEEP_TITLES
from saturated_dag.profiles import available_profiles, load_profile
from tests.conftest import REPO_ROOT

SCANNED = ("saturated_dag", "assets", "resources", "jobs", "scripts", "benchmarks", "deploy",
           "tests")


def _imported_names() -> dict[str, str]:
    """Each name imported ``from saturated_dag.config`` anywhere in the repository, with the
    first file that imports it."""
    found: dict[str, str] = {}
    paths = [REPO_ROOT / "definitions.py", *(p for top in SCANNED
                                            for p in (REPO_ROOT / top).rglob("*.py"))]
    for path in paths:
        if not path.is_file() or path.is_relative_to(REPO_ROOT / "saturated_dag" / "config"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "saturated_dag.config":
                for alias in node.names:
                    found.setdefault(alias.name, str(path.relative_to(REPO_ROOT)))
    return found


def test_the_package_is_what_imports_find() -> None:
    assert Path(config.__file__).parent.name == "config"
    assert Path(config.__file__).name == "__init__.py"


def test_every_imported_name_is_exported() -> None:
    imported = _imported_names()
    assert "Profile" in imported  # the scan found the importers
    missing = {name: where for name, where in imported.items() if name not in config.__all__}
    assert not missing
    assert all(hasattr(config, name) for name in config.__all__)


@pytest.mark.parametrize("name", available_profiles())
def test_every_shipped_profile_loads(name: str) -> None:
    profile = load_profile(name)
    assert isinstance(profile, Profile)
    assert profile.name


def test_the_one_list_of_sweeps() -> None:
    """``SWEEPS`` is ``SweepSettings``' fields, in table order, and names every sweep table."""
    assert SWEEPS == tuple(SweepSettings.model_fields) == ("rank_weight", "rrhf_variants",
                                                           "dpo_beta")
    from assets.result_tables import SWEEP_ASSETS
    from saturated_dag.schemas import SWEEP_SETTINGS

    # each sweep's title, table asset and setting columns: keyed by the one list, in its order
    for keyed in (SWEEP_TITLES, SWEEP_ASSETS, SWEEP_SETTINGS):
        assert tuple(keyed) == SWEEPS


def test_configured_sweeps_keeps_the_order_and_drops_the_nulls() -> None:
    sweeps = SweepSettings.model_validate({"dpo_beta": {}, "rank_weight": {}})
    assert list(configured_sweeps(sweeps)) == ["rank_weight", "dpo_beta"]
    assert configured_sweeps(SweepSettings()) == {}


def test_scorer_fields_name_each_row_scorer_with_its_field() -> None:
    profile = load_profile("demo", {
        "tasks": ["chain_sum"],
        "scoring": {"known_answer_scorers": ["oracle"]},
        "training": {"methods": ["dpo", "rrhf", "sft"], "scorers": ["entropy", "random"],
                     "method_scorers": {"dpo": ["oracle"]},
                     "sweeps": {"rank_weight": {"scorer": "random"}, "rrhf_variants": None,
                                "dpo_beta": {"scorer": "entropy"}}}})
    assert profile.scorer_fields() == [
        ("entropy", "training.scorers"), ("random", "training.scorers"),
        ("oracle", "training.method_scorers.dpo"),
        ("random", "training.sweeps.rank_weight.scorer"),
        ("entropy", "training.sweeps.dpo_beta.scorer")]
    assert profile.scorer_names() == ["oracle", "entropy", "random"]


@pytest.mark.parametrize("name", available_profiles())
def test_the_graph_scores_every_scorer_a_profile_names(name: str) -> None:
    """Each scorer ``Profile.scorer_names`` lists that applies to a task has its score asset
    in that task's graph (``scorers.builtin.task_scorers`` of the plan's ``scorer_names``,
    which ``assets.task_assets`` builds one score asset for each of)."""
    from saturated_dag.experiments import experiment_plan
    from saturated_dag.scorers.builtin import scorer, task_scorers

    profile = load_profile(name)
    for task, plan in experiment_plan(profile).items():
        scored = {spec.name for spec in task_scorers(plan.scorer_names, task)}
        named = {n for n in profile.scorer_names() if scorer(n).applies_to(task)}
        assert named <= scored, (task, named - scored)
