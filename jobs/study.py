"""``study``: the embedded study (docs/study.md) — every asset of the ``study`` profile.

The same graph as ``demo``, sized by the study's power calculation: two training seeds per
adapter, 480 eval questions. It runs only on a code location loaded with
``SATURATED_DAG_PROFILE=study`` (the run is tagged with that profile, and a location serving
another profile refuses the run before any step); ``scripts/run_study.sh`` does that and
writes the study's report from the run's tables (``outputs/study/study_report.md``; the
snapshot in docs/results.md is refreshed only by ``scripts/study_report.py --results-doc``).
"""

from jobs.demo import whole_profile_job
from jobs.staged import RunTagsFor, no_run_tags
from saturated_dag.config import Profile

STUDY_PROFILE = "study"


def study_job(profile: Profile, run_tags_for: RunTagsFor = no_run_tags) -> list:
    return whole_profile_job(
        "study", profile,
        "The embedded study: every asset of profile 'study' (two training seeds, 480 eval "
        "questions; docs/study.md). Load the location with SATURATED_DAG_PROFILE=study, or "
        "use scripts/run_study.sh.",
        tags={"saturated_dag/profile": STUDY_PROFILE}, run_tags_for=run_tags_for)
