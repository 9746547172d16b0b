"""One profile per output folder (``saturated_dag.infra.output_stamp``): a run of another profile is
refused before any step, naming both, instead of reading the other profile's files as its own.

The fault it closes: ``ci`` and a copy of it that differs only in ``chain_sum.seed`` run on one
folder; the copy built its partitions from ``ci``'s pool, every check passing.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from saturated_dag.infra.output_stamp import STAMP, OutputFolderInUse, claim
from saturated_dag.profiles import PROFILE_DIR, load_profile
from tests.pipeline import asset_path, by_name, graph, resources


def _copy_of_ci(tmp_path: Path, **changes: object) -> str:
    data = yaml.safe_load((PROFILE_DIR / "ci.yaml").read_text())
    data["chain_sum"].update(changes)
    path = tmp_path / "ci_seed1.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_another_profile_is_refused_naming_both_and_what_differs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert claim(out, "ci", load_profile("ci").model_dump()) == []
    assert (out / STAMP).is_file()
    copy = _copy_of_ci(tmp_path, seed=1)
    with pytest.raises(OutputFolderInUse, match=r"belongs to profile 'ci'(.|\n)*"
                                                rf"{copy}(.|\n)*chain_sum.seed: 0 -> 1"):
        claim(out, copy, load_profile(copy).model_dump())
    # a copy with the same settings is still another profile: it owns its own folder
    same = _copy_of_ci(tmp_path)
    with pytest.raises(OutputFolderInUse, match="belongs to profile 'ci'"):
        claim(out, same, load_profile(same).model_dump())


def test_the_owning_profile_may_change_settings_and_is_told_which(tmp_path: Path) -> None:
    out = tmp_path / "out"
    claim(out, "ci", load_profile("ci").model_dump())
    changed = claim(out, "ci", load_profile("ci", {"chain_sum": {"seed": 3}}).model_dump())
    assert changed == ["chain_sum.seed: 0 -> 3"]
    # run-level settings (batch sizes, eval replicates, workers) are not data: no change
    assert claim(out, "ci", load_profile("ci", {
        "chain_sum": {"seed": 3}, "policy": {"batch_size": 3}, "verify_workers": 2,
        "evaluation": {"replicates": 2}}).model_dump()) == []


def test_a_run_of_another_profile_fails_before_any_step_and_keeps_the_files(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "out"
    tiny = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                          "strict_grid": None, "eval_questions_per_cell": 2},
            "sampling": {"n": 2, "max_new_tokens": 6},
            "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    pool = by_name(graph("ci", tiny)[0], "chain_sum", "generation_pool")
    assert dg.materialize(pool, resources=resources(out, "ci", tiny)).success
    written = asset_path(out, "chain_sum", "generation_pool").read_bytes()
    copy = _copy_of_ci(tmp_path, seed=1)
    result = dg.materialize(by_name(graph(copy, tiny)[0], "chain_sum", "generation_pool"),
                            resources=resources(out, copy, tiny), raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_failure)
    assert "belongs to profile 'ci'" in str(failure.event_specific_data)
    assert "chain_sum.seed: 0 -> 1" in str(failure.event_specific_data)
    assert asset_path(out, "chain_sum", "generation_pool").read_bytes() == written


def test_the_paper_jobs_run_a_profile_given_as_a_yaml_path(tmp_path: Path,
                                                          tiny_model_dir: Path) -> None:
    """docs/profiles.md: "copy one, edit it, and point SATURATED_DAG_PROFILE at the file".
    The paper jobs tagged their runs with the profile's name, which clashed with the
    location's path, so every run of them was refused."""
    from jobs.paper import paper_job

    copy = _copy_of_ci(tmp_path)
    tiny = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                          "strict_grid": None, "eval_questions_per_cell": 2},
            "sampling": {"n": 2, "max_new_tokens": 6},
            "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    first = paper_job("chain_sum", load_profile(copy, tiny))[0]  # its first part
    tags = {k: v for k, v in first.tags.items() if not k.startswith("dagster/")}
    result = dg.materialize(by_name(graph(copy, tiny)[0], "chain_sum", "generation_pool"),
                            resources=resources(tmp_path / "out", copy, tiny), tags=tags)
    assert result.success
    assert result.dagster_run.tags.get("saturated_dag/profile") == copy
