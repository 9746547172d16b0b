"""``demo``: the whole pipeline on the active profile's tasks (the embedded default by default).

Pool, partitions, scores, datasets, adapters, eval reports and result tables.
"""

import dagster as dg

from saturated_dag.config import Profile


def whole_profile_job(name: str, profile: Profile, description: str,
                      tags: dict[str, str] | None = None):
    """A job of every asset of the profile's tasks (and the base model), in one process so
    the policy model loads once: ``demo`` and ``study`` differ only in name and tags."""
    return dg.define_asset_job(
        name=name,
        selection=dg.AssetSelection.assets("base_model")
        | dg.AssetSelection.key_prefixes(*[[task] for task in profile.tasks]),
        executor_def=dg.in_process_executor,
        tags=tags,
        description=description,
    )


def demo_job(profile: Profile):
    return whole_profile_job(
        "demo", profile,
        f"Every asset of the tasks of profile {profile.name!r} ({', '.join(profile.tasks)}), "
        "in one process so the policy model loads once.")
