"""``demo``: the whole pipeline on the active profile's tasks (the embedded default by default).

It grows with the pipeline; today it samples the generation pool and splits it by difficulty.
"""

import dagster as dg

from saturated_dag.config import load_profile


def demo_job(profile_name: str):
    tasks = load_profile(profile_name).tasks
    return dg.define_asset_job(
        name="demo",
        selection=dg.AssetSelection.assets("base_model") | dg.AssetSelection.groups(*tasks),
        executor_def=dg.in_process_executor,
        description=f"Every asset of the tasks of profile {profile_name!r} ({', '.join(tasks)}), "
        "in one process so the policy model loads once.",
    )
