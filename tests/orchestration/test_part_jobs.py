"""Issue 50: a whole-task job's parts explain themselves, and README and docs/jobs.md name the
ways that run the whole graph.

The UI lists a part by its name only, so its description must say which part of which job it
is, what runs before and after it, and the one command (and the UI's one action) that runs
them all; its tags group a job's parts and their runs. The docs must name each part's
``dg launch --job`` in order, ``python -m run_parts``, **Materialize all**, and the Dagster
command that cannot work on mixed partitions with the one that does. What the UI's action
does is tested in a browser (``tests/project/test_web_ui.py``, slow).
"""

from __future__ import annotations

import re

import pytest

from jobs.location import build_defs
from jobs.staged import PART_TAG, WHOLE_JOB_TAG, part_names, whole_jobs
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def demo_defs():
    return build_defs("demo", "outputs")


@pytest.mark.parametrize(("profile_name", "job"),
                         [("demo", "demo"), ("study", "study"), ("paper", "paper_chain_sum")])
def test_each_part_says_where_it_stands_and_how_to_run_them_all(profile_name: str,
                                                                job: str) -> None:
    """A whole-graph job's parts, on the location of the profile that lists it."""
    defs = build_defs(profile_name, "outputs")
    profile = load_profile(profile_name)
    names = part_names(job, profile, whole_jobs(profile)[job])
    count = len(names)
    assert count >= 2, names
    for index, name in enumerate(names):
        definition = defs.resolve_job_def(name)
        text = definition.description
        assert text.startswith(f"Part {index + 1} of {count} of `{job}`: "), text
        before = f"`{names[index - 1]}`" if index else "nothing (this part is the first)"
        after = (f"`{names[index + 1]}`" if index < count - 1
                 else f"nothing (this part completes `{job}`)")
        assert f"Before it: {before}. After it: {after}." in text, text
        assert f"`python -m run_parts {job}`" in text
        assert all(f"`{n}`" in text for n in names)  # the whole sequence, in order
        assert "**Materialize all**" in text
        # grouped: the job's page shows these, and every run of the part carries them
        for tags in (definition.tags, definition.run_tags):
            assert tags[WHOLE_JOB_TAG] == job and tags[PART_TAG] == f"{index + 1} of {count}"
    if profile.data_seeds == 1:  # one draw: upstream, adapters' partition sets, downstream
        assert "everything upstream of the adapters" in defs.resolve_job_def(
            names[0]).description
        assert "everything downstream of them" in defs.resolve_job_def(
            names[-1]).description


@pytest.mark.parametrize(("profile_name", "whole"), [
    ("demo", ["demo"]), ("ci", ["demo"]), ("study", ["study"]), ("testbed", ["testbed"]),
    ("dpo_diagnosis", ["dpo_recipe_search"]),
    ("paper", ["demo", "paper_chain_sum", "paper_gsm8k"]), ("paper_instruct", ["paper_gsm8k"]),
])
def test_each_location_lists_its_own_profiles_jobs_only(profile_name: str,
                                                        whole: list[str]) -> None:
    """One whole-graph job per graph, named for the profile (the defaults: the demo's location
    lists ``demo``'s parts and no study, testbed or paper job), and the parts CLI refuses a job
    the location does not list."""
    from jobs.parts import job_parts

    profile = load_profile(profile_name)
    assert list(whole_jobs(profile)) == whole
    listed = {job.name for job in build_defs(profile_name, "outputs").jobs}
    expected = {name for job in whole
                for name in part_names(job, profile, whole_jobs(profile)[job])}
    groups = {name for name in listed
              if name not in {*(f"{t}_generation" for t in profile.tasks),
                              "nightly_evaluation", "pretrain_base_model"}}
    assert groups == expected, sorted(groups ^ expected)
    if profile_name == "demo":
        import os

        os.environ["SATURATED_DAG_PROFILE"] = "demo"
        try:
            refused = job_parts("study")
        finally:
            del os.environ["SATURATED_DAG_PROFILE"]
        assert isinstance(refused, str) and "has no job 'study'" in refused


def test_a_job_of_one_part_keeps_its_description_and_has_no_part_tags(demo_defs) -> None:
    generation = demo_defs.resolve_job_def("chain_sum_generation")
    assert WHOLE_JOB_TAG not in generation.tags and PART_TAG not in generation.tags


@pytest.mark.parametrize("page", ["README.md", "docs/jobs.md"])
def test_the_docs_name_the_ui_action_and_the_commands_that_work(page: str) -> None:
    text = (REPO_ROOT / page).read_text()
    profile = load_profile("demo")
    commands = [f"dg launch --job {name}" for name in part_names("demo", profile,
                                                                     profile.tasks)]
    at = [text.find(command) for command in commands]
    assert all(i >= 0 for i in at) and at == sorted(at), (page, at)  # each part, in order
    assert "python -m run_parts demo" in text
    assert "**Materialize all**" in text
    # the Dagster commands that cannot work here, in one line that names what does
    line = next((ln for ln in text.splitlines() if "--select '*'" in ln), "")
    assert "dg launch --assets '*'" in line and re.search(r"python -m run_parts|Materialize",
                                                          line), (page, line)
