"""``testbed``: the calibrated testbed alone (docs/testbed.md).

Its one asset, ``chain_sum/testbed_validation``, samples its own pools, so the job needs
nothing else of the graph. It runs on a location whose profile has a ``testbed`` section:
``SATURATED_DAG_PROFILE=testbed`` (``scripts/run_testbed.sh``); the ``study`` job includes the
same asset when the study profile has one.
"""

import dagster as dg

from saturated_dag.config import Profile


def testbed_jobs(profile: Profile) -> list:
    if profile.testbed is None:
        return []
    return [dg.define_asset_job(
        name="testbed",
        selection=dg.AssetSelection.assets(["chain_sum", "testbed_validation"]),
        executor_def=dg.in_process_executor,
        description="The calibrated testbed of profile "
        f"{profile.name!r}: positive and negative controls, the reliability dial "
        "(docs/testbed.md).")]
