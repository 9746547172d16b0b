"""A job over adapters of several partitions definitions: one run each (docs/jobs.md).

Each cell's adapters are one asset with one Dagster partition per configuration x training seed
(``assets/adapters.py``), and Dagster runs partitioned assets of one partitions definition
together, so a job whose cells have different partition keys (``TaskPlan.cells_by_partitions``)
is a sequence of parts, each an ordinary asset job: part 1 holds everything upstream of the
adapters and the first partition set's cells, each middle part one partition set's cells, and
the last part the last set's cells and everything downstream (selections, eval reports, tables).
With several data seeds (``data_seeds``) the job starts with one part per data seed for what is
upstream of and beside the adapters (``assets/_draws.py``). With ``training.recipes`` a
partition set whose cells train the recipe another cell's selection chooses comes after every
other set, and its part runs those selections first.

Each part carries its partition set's whole range as run tags, so a plain ``dg launch --job
<part>`` trains every adapter of its cells, each cell in one step; with one partition set the
job is one part and keeps its name. Each part carries ``WHOLE_JOB_TAG`` and ``PART_TAG`` and a
description naming what comes before and after it and the command that runs them all, since the
UI lists jobs by name only. **Materialize all** in the UI is the other way: one asset backfill
over every asset and partition. ``python -m jobs.parts demo`` lists the parts of ``demo``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import Any, TypeVar

import dagster as dg

from assets._adapter_files import adapter_key
from assets._keys import located
from saturated_dag.config import Profile
from saturated_dag.experiments import data_seed_key, data_seed_of, experiment_plan

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
WHOLE_JOB_TAG = "saturated_dag/whole_job"
"""The whole-task job a part belongs to (``demo``): one tag to filter its parts' runs by."""
PART_TAG = "saturated_dag/part"
"""Which part it is, as ``2 of 4``."""
UI_ACTION = ("in the UI, **Materialize all** on **Lineage** runs the whole graph as one "
             "backfill")
"""The UI's one action for the whole graph, as the parts' descriptions name it."""

T = TypeVar("T")


def partition_groups(profile: Profile, tasks: Sequence[str]
                ) -> dict[tuple[str, ...], list[dg.AssetKey]]:
    """Each distinct partition set (its partition keys) of ``tasks``' cells, with the adapter assets
    that have it, in plan order; a partition set whose cells train a recipe another cell's selection
    chooses (``training.recipes``) after every partition set that has none, so the selection it
    reads is materialised in an earlier part or its own."""
    groups: dict[tuple[str, ...], list[dg.AssetKey]] = {}
    following: set[tuple[str, ...]] = set()
    plans = experiment_plan(profile)
    for task in tasks:
        plan = plans[task]
        for partition_keys, cells in plan.cells_by_partitions.items():
            groups.setdefault(partition_keys, []).extend(located(profile, adapter_key(task, cell))
                                               for cell in cells)
            if any(plan.recipe_cell(c) in plan.selections for c in cells):
                following.add(partition_keys)
    return dict(sorted(groups.items(), key=lambda item: item[0] in following))


def draw_parts(profile: Profile) -> int:
    """The parts that run the pool side, one per data seed; 0 with one data seed (then the
    first partition set's part runs it)."""
    return profile.data_seeds if profile.data_seeds > 1 else 0


def whole_jobs(profile: Profile) -> dict[str, tuple[str, ...]]:
    """The whole-graph jobs a code location of ``profile`` lists, each with the tasks it covers:
    one job of every asset, named for what the profile is for (``study``, the testbed's
    ``testbed`` or ``dpo_recipe_search``, else ``demo``), and one job per task
    (``paper_<task>``) for a profile of several tasks or on the paper's vLLM path. One name
    per graph: the location lists no second job of the same assets, and no other profile's."""
    if profile.name == "study":
        main = "study"
    elif profile.testbed is not None:
        main = ("dpo_recipe_search" if profile.testbed.analysis == "dpo_recipe_search"
                else "testbed")
    else:
        main = "demo"
    per_task = {f"paper_{task}": (task,) for task in profile.tasks}
    if len(profile.tasks) == 1 and profile.policy.backend == "vllm" and main == "demo":
        return per_task  # one task: its paper_<task> job is the whole graph
    return {main: tuple(profile.tasks), **(per_task if len(profile.tasks) > 1 else {})}


def part_names(name: str, profile: Profile, tasks: Sequence[str]) -> list[str]:
    """The jobs that together run ``name``, in the order they must run."""
    sets = len(partition_groups(profile, tasks))
    count = draw_parts(profile) + (max(sets, 1) if draw_parts(profile) else sets)
    return [name] if count <= 1 else [f"{name}_part_{i}_of_{count}"
                                      for i in range(1, count + 1)]


def split_into_parts(groups: Sequence[tuple[tuple[str, ...], T]], before: T, after: T,
                     join: Callable[[list[T]], T]) -> list[tuple[tuple[str, ...], T]]:
    """The one rule of the parts, for asset selections (``staged_jobs``) and for lists of keys
    (``stages``): part 1 is ``before`` (what is upstream of the adapters) and the first partition
    set's cells; each middle part one partition set's cells; the last part the last partition set's
    cells and ``after`` (everything downstream). ``groups``: each partition set's keys with its
    cells."""
    last = len(groups) - 1
    return [(partition_keys, join([*([before] if index == 0 else []), cells,
                         *([after] if index == last else [])]))
            for index, (partition_keys, cells) in enumerate(groups)]


RunTagsFor = Callable[[dg.AssetSelection], Mapping[str, str]]
"""The run tags a job over a selection gets besides its own tags: ``build_defs`` gives a
cluster's accelerator config to every job that includes a ``gpu`` asset."""


def no_run_tags(selection: dg.AssetSelection) -> Mapping[str, str]:
    """``RunTagsFor`` of a location that adds none (the default)."""
    return {}


def asset_job(name: str, selection: dg.AssetSelection, *, run_tags_for: RunTagsFor,
              tags: Mapping[str, str] | None = None, **kwargs: Any
              ) -> dg.UnresolvedAssetJobDefinition:
    """``define_asset_job`` with the run tags its selection calls for, given when the job is
    defined (its own ``tags`` are run tags too, as Dagster does when ``run_tags`` is unset)."""
    extra = run_tags_for(selection)
    return dg.define_asset_job(name, selection=selection, tags=tags,
                               run_tags={**(tags or {}), **extra} if extra else None, **kwargs)


def staged_jobs(name: str, profile: Profile, tasks: Sequence[str], *,
                executor_def: dg.ExecutorDefinition, description: str,
                tags: dict[str, str] | None = None,
                run_tags_for: RunTagsFor = no_run_tags) -> list[dg.UnresolvedAssetJobDefinition]:
    """The parts of the job ``name`` over the base model and every asset of ``tasks``."""
    groups = partition_groups(profile, tasks)
    base = dg.AssetSelection.assets(located(profile, "base_model"))
    whole = base | dg.AssetSelection.key_prefixes(
        *[[*profile.key_prefix_parts(), task] for task in tasks])
    if not groups and not draw_parts(profile):
        return [asset_job(name, whole, executor_def=executor_def, tags=tags,
                          description=description, run_tags_for=run_tags_for)]
    if draw_parts(profile):
        return _jobs_by_draw(name, profile, tasks, groups, whole, executor_def=executor_def,
                             description=description, tags=tags, run_tags_for=run_tags_for)
    adapters = dg.AssetSelection.assets(*[k for keys in groups.values() for k in keys])
    # the base model's observation first: every adapter depends on it (an observable source
    # is not reached by ``upstream()``)
    before = ((adapters.upstream() - adapters.downstream()) | base) & whole

    bridged = _bridged(groups)
    after = whole - before - reduce(operator.or_, [sel for _, sel in bridged])
    names = part_names(name, profile, tasks)
    jobs = []
    parts = split_into_parts(bridged, before, after, lambda pieces: reduce(operator.or_, pieces))
    for index, (partition_keys, selection) in enumerate(parts):
        keys = groups[partition_keys]
        part_tags = ({} if len(names) == 1 else
                     {WHOLE_JOB_TAG: name, PART_TAG: f"{index + 1} of {len(names)}"})
        jobs.append(asset_job(
            names[index], selection, executor_def=executor_def, run_tags_for=run_tags_for,
            tags={**(tags or {}), **part_tags, RANGE_START: partition_keys[0],
                  RANGE_END: partition_keys[-1]},
            description=(description if len(names) == 1 else
                         part_description(name, names, index, description, partition_keys,
                                          len(keys)))))
    return jobs


def _bridged(groups: dict[tuple[str, ...], list[dg.AssetKey]]
             ) -> list[tuple[tuple[str, ...], dg.AssetSelection]]:
    """Each partition set's adapters with the selections they train the recipe of (downstream of
    other adapters, upstream of these: ``training.recipes``)."""
    adapters = dg.AssetSelection.assets(*[k for keys in groups.values() for k in keys])
    out = []
    for partition_keys, keys in groups.items():
        cells = dg.AssetSelection.assets(*keys)
        out.append((partition_keys, cells | (cells.upstream() & adapters.downstream() - adapters)))
    return out


def _jobs_by_draw(name: str, profile: Profile, tasks: Sequence[str],
                  groups: dict[tuple[str, ...], list[dg.AssetKey]], whole: dg.AssetSelection,
                  *, executor_def: dg.ExecutorDefinition, description: str,
                  tags: dict[str, str] | None, run_tags_for: RunTagsFor
                  ) -> list[dg.UnresolvedAssetJobDefinition]:
    """The parts of a job of a profile with several data seeds: one per data seed over the pool side
    (everything downstream of the pools and not of the adapters), then one per partition set
    (``split_into_parts`` without a ``before``), the last with everything downstream."""
    pools = dg.AssetSelection.assets(*[located(profile, [task, "generation_pool"])
                                       for task in tasks])
    base = dg.AssetSelection.assets(located(profile, "base_model"))
    adapters = dg.AssetSelection.assets(*[k for keys in groups.values() for k in keys])
    pool_side = (pools.downstream() - adapters.downstream()) & whole
    bridged = _bridged(groups)
    after = whole - pool_side - base - adapters - reduce(
        operator.or_, [sel for _, sel in bridged], dg.AssetSelection.assets())
    names = part_names(name, profile, tasks)
    runs: list[tuple[dg.AssetSelection, str, str, str]] = []
    for draw in range(profile.data_seeds):
        key = data_seed_key(draw)
        selection = pool_side | (base if draw == 0 else dg.AssetSelection.assets())
        runs.append((selection, key, key,
                     f"the pool side of data seed {draw} of {profile.data_seeds} (its pool, "
                     "difficulty partitions, scores, agreement table and datasets)"
                     + (", after the base model's observation" if draw == 0 else "")))
    empty = dg.AssetSelection.assets()
    cells = [(partition_keys, sel) for partition_keys, sel in bridged] or [((), empty)]
    for index, (partition_keys, selection) in enumerate(cells):
        last = index == len(cells) - 1
        what = (f"the adapters of {len(groups[partition_keys])} cell(s) with the partition keys "
                f"{_shown(partition_keys)}"
                if partition_keys else "")
        if last:
            what += ((", then " if what else "") + "everything downstream of the adapters "
                     "(selections, eval reports, tables)")
        runs.append((selection | after if last else selection,
                     partition_keys[0] if partition_keys else "",
                     partition_keys[-1] if partition_keys else "", what))
    jobs = []
    for index, (selection, start, end, what) in enumerate(runs):
        part_tags = {WHOLE_JOB_TAG: name, PART_TAG: f"{index + 1} of {len(names)}"}
        if start:
            part_tags.update({RANGE_START: start, RANGE_END: end})
        jobs.append(asset_job(
            names[index], selection, executor_def=executor_def, run_tags_for=run_tags_for,
            tags={**(tags or {}), **part_tags},
            description=_describe_part(name, names, index, description, what)))
    return jobs


def _describe_part(name: str, names: Sequence[str], index: int, description: str,
                   this: str) -> str:
    """Part ``index`` of ``name`` in words: what it runs (``this``), what comes before and
    after, and the one command that runs them all (``part_description``'s form)."""
    last = len(names) - 1
    before = f"`{names[index - 1]}`" if index > 0 else "nothing (this part is the first)"
    after = (f"`{names[index + 1]}`" if index < last
             else f"nothing (this part completes `{name}`)")
    return (f"Part {index + 1} of {len(names)} of `{name}`: {description} This part: {this}. "
            f"Before it: {before}. After it: {after}. All {len(names)} parts in order, one "
            f"command: `python -m run_parts {name}` (or `dg launch --job <part>` for each of "
            f"{', '.join(f'`{n}`' for n in names)}); {UI_ACTION}.")


def part_description(name: str, names: Sequence[str], index: int, description: str,
                     partition_keys: Sequence[str], cells: int) -> str:
    """What part ``index`` of ``name`` (its parts ``names``) is, what runs before and after it,
    and the one command (and the UI's one action) that runs them all: the jobs list shows a
    part by its name only, and a user who launches it alone must learn there that the graph
    is not complete until the last part has run."""
    this = (("everything upstream of the adapters (the base model's observation, pool, "
             "difficulty partitions, scores, datasets), then " if index == 0 else "")
            + f"the adapters of {cells} cell(s) with the partition keys {_shown(partition_keys)}"
            + (", then everything downstream of them (selections, eval reports, tables)"
               if index == len(names) - 1 else ""))
    return _describe_part(name, names, index, description, this)


def _shown(partition_keys: Sequence[str]) -> str:
    """A partition set's first keys, and how many more."""
    more = len(partition_keys) - 3
    return ", ".join(partition_keys[:3]) + (f" and {more} more" if more > 0 else "")


def _is_data_seed(partition: str) -> bool:
    try:
        data_seed_of(partition)
    except ValueError:
        return False
    return True


def _ancestors(assets: Sequence[Any], start: Sequence[dg.AssetKey]) -> set[dg.AssetKey]:
    """Every asset upstream of ``start`` among ``assets``."""
    parents = {spec.key: {dep.asset_key for dep in spec.deps}
               for a in assets if isinstance(a, dg.AssetsDefinition) for spec in a.specs}
    found: set[dg.AssetKey] = set()
    todo = list(start)
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent not in found:
                found.add(parent)
                todo.append(parent)
    return found


def stages(assets: Sequence[Any], keys: Sequence[dg.AssetKey]
           ) -> list[tuple[list[dg.AssetKey], dict[str, str]]]:
    """``keys`` of ``assets`` split into runs by the rule of ``staged_jobs``
    (``split_into_parts``): each run's keys and its partition-range tags (none when no
    selected asset is partitioned). For a slice of the graph, as ``dg.materialize`` runs it
    (the tests' ``tests.pipeline.materialize``)."""
    by_key = {k: a for a in assets if isinstance(a, dg.AssetsDefinition) for k in a.keys}
    groups: dict[tuple[str, ...], list[dg.AssetKey]] = {}
    for key in keys:
        partitions = by_key[key].partitions_def
        if partitions is not None:
            groups.setdefault(tuple(partitions.get_partition_keys()), []).append(key)
    draws = next((g for g in groups if all(_is_data_seed(p) for p in g)), None)
    if draws is not None:  # the pool side: one run per data seed, then the rest
        pool_side = groups[draws]
        unpartitioned = [k for k in keys if by_key[k].partitions_def is None]
        upstream = _ancestors(assets, pool_side)
        first = [k for k in unpartitioned if k in upstream]
        rest = [k for k in keys if k not in pool_side and k not in first]
        return [([*(first if i == 0 else []), *pool_side], {RANGE_START: d, RANGE_END: d})
                for i, d in enumerate(draws)] + (stages(assets, rest) if rest else [])
    if not groups:
        return [(list(keys), {})]
    parted = {k for group in groups.values() for k in group}

    def ancestors(start: Sequence[dg.AssetKey]) -> set[dg.AssetKey]:
        return _ancestors(assets, start)

    below_adapters = {k for k in keys if k not in parted and ancestors([k]) & parted}
    # a partition set's bridges: the selections its cells train the recipe of (``training.recipes``)
    bridges = {partition_keys: [k for k in keys if k in below_adapters and k in ancestors(group)]
               for partition_keys, group in groups.items()}
    ordered = sorted(groups.items(), key=lambda item: bool(bridges[item[0]]))
    upstream = ancestors(list(parted))
    before = [k for k in keys if k not in parted and k in upstream and k not in below_adapters]
    bridged = {k for found in bridges.values() for k in found}
    after = [k for k in keys if k not in parted and k not in before and k not in bridged]
    parts = split_into_parts([(partition_keys, [*bridges[partition_keys], *group])
                              for partition_keys, group in ordered],
                             before, after,
                             lambda pieces: [k for piece in pieces for k in piece])
    return [(selected, {RANGE_START: partition_keys[0], RANGE_END: partition_keys[-1]})
            for partition_keys, selected in parts]
