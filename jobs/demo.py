"""``demo``: the whole pipeline on the active profile's tasks (the embedded default by default).

Pool, partitions, scores, datasets, adapters, eval reports and result tables.
"""

import dagster as dg

from saturated_dag.config import Profile


def demo_job(profile: Profile):
    tasks, profile_name = profile.tasks, profile.name
    return dg.define_asset_job(
        name="demo",
        selection=dg.AssetSelection.assets("base_model")
        | dg.AssetSelection.key_prefixes(*[[task] for task in tasks]),
        executor_def=dg.in_process_executor,
        description=f"Every asset of the tasks of profile {profile_name!r} ({', '.join(tasks)}), "
        "in one process so the policy model loads once.",
    )
