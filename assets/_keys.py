"""The profile's key prefix (``Profile.key_prefix``): where a graph's asset keys start.

README's UI (``dagster dev``, ``workspace.yaml``) shows the demo, the testbed and the study
over one instance, and a Dagster deployment holds one definition per asset key: without a
prefix the three profiles' runs would record ``chain_sum/results_table`` alike, and the page
would show whichever ran last. The asset factories build keys from the task
(``chain_sum/...``); ``with_key_prefix`` then moves the whole graph under the profile's prefix
in one pass, with Dagster's own key replacement (``AssetsDefinition.with_attributes``, what
``load_assets_from_modules(key_prefix=...)`` uses), so inputs, dependencies and checks follow;
its groups take the prefix too (``prefixed_group``).
Code that names a key of the graph after it is built (jobs' selections, the nightly schedule,
links and observations written at run time) turns it into the graph's key with ``located``;
the IO manager lays files out by the key after the prefix
(``ExperimentLocation.key_prefix``), so each profile's output folder keeps one layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from saturated_dag.config import Profile


def located(profile: Profile, key: dg.CoercibleToAssetKey) -> dg.AssetKey:
    """``key`` as the factories spell it (``["chain_sum", "eval", "base"]``, ``"base_model"``)
    as it is in the profile's graph."""
    return dg.AssetKey([*profile.key_prefix_parts(), *dg.AssetKey.from_coercible(key).path])


def with_key_prefix(profile: Profile, assets: Sequence[Any],
                    checks: Sequence[dg.AssetChecksDefinition]
                    ) -> tuple[list[Any], list[dg.AssetChecksDefinition]]:
    """``assets`` and ``checks`` with every key moved under the profile's prefix (the lists
    as they are when it has none). Every key the graph defines or depends on moves, so no
    dependency is left pointing at another profile's asset."""
    if not profile.key_prefix_parts():
        return list(assets), list(checks)
    keys: set[dg.AssetKey] = set()
    for item in [*assets, *checks]:
        for spec in getattr(item, "specs", ()):
            keys |= {spec.key, *(dep.asset_key for dep in spec.deps)}
        keys |= {check.asset_key for check in getattr(item, "check_specs", ())}
        keys |= set(getattr(item, "keys_by_input_name", {}).values())
    replacements = {key: located(profile, key) for key in keys}
    moved = [a.with_attributes(asset_key_replacements=replacements) for a in assets]
    return ([a.map_asset_specs(lambda spec: spec.replace_attributes(
                group_name=prefixed_group(profile, spec.group_name or "default")))
             for a in moved],
            [c.with_attributes(asset_key_replacements=replacements) for c in checks])


def prefixed_group(profile: Profile, group: str) -> str:
    """The group ``group`` (``chain_sum_saturated``) as the profile's graph names it
    (``testbed_chain_sum_saturated``): the UI's Lineage lists groups by name across
    locations, so the testbed's ``chain_sum`` would fall in with the demo's. A group already
    named by the prefix (the testbed's own ``testbed``) keeps its name."""
    prefix = profile.key_prefix
    if not prefix or group == prefix or group.startswith(f"{prefix}_"):
        return group
    return f"{prefix}_{group}"

