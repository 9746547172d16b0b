"""``testbed``: the calibrated testbed (docs/testbed.md) — its cells and its analysis.

The testbed's rows are ordinary cells of the plan, so the job is every asset of the
``testbed`` profile's graph: the pool, the known-answer scores, the datasets, every adapter
(each method's recipe chosen on its oracle cell first: those cells run in the earlier parts,
``jobs/staged.py``), the eval reports and the analysis ``chain_sum/testbed_validation``. A
re-run after a kill trains only the adapters not yet published; an edit to the analysis
re-runs the analysis alone. It runs on a location whose profile has a ``testbed`` section
and trains the testbed's cells: ``SATURATED_DAG_PROFILE=testbed`` (``scripts/run_testbed.sh``);
on ``study`` the same cells sit in the study's own job. A profile whose testbed analysis is
``dpo_recipe_search`` (``dpo_search``) gets the job ``dpo_recipe_search`` instead.
"""

from jobs.demo import whole_profile_job
from jobs.staged import RunTagsFor, no_run_tags
from saturated_dag.config import Profile


def testbed_jobs(profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    if profile.testbed is None:
        return []
    if profile.testbed.analysis == "dpo_recipe_search":
        return whole_profile_job(
            "dpo_recipe_search", profile,
            f"DPO's recipe search of profile {profile.name!r}: DPO on the oracle and on its "
            "shuffled scores at every recipe training.selection lists, the base model's "
            "validation results and the analysis chain_sum/dpo_recipe_search "
            "(docs/testbed.md).", run_tags_for=run_tags_for)
    return whole_profile_job(
        "testbed", profile,
        f"The calibrated testbed of profile {profile.name!r}: each method's positive and "
        "negative controls, the reliability dial and SFT's controls, as cells of the graph, "
        "and their analysis chain_sum/testbed_validation (docs/testbed.md).",
        run_tags_for=run_tags_for)
