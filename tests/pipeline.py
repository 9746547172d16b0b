"""The profile's graph and resources as the tests build them: the same calls as definitions.py.

Why one helper: every asset test materialises a slice of ``profile_assets(profile)`` on
``make_resources(profile, output_dir, overrides)``, so a test runs exactly the versioned
assets, checks and resources the code location serves.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from assets import profile_assets
from jobs.staged import stages
from resources import make_resources
from saturated_dag.profiles import load_profile


def graph(profile: str = "demo", overrides: dict | None = None
          ) -> tuple[list[Any], list[dg.AssetChecksDefinition]]:
    """``(assets, checks)`` of the profile with ``overrides`` merged in."""
    return profile_assets(load_profile(profile, overrides or {}))


def resources(out: Path, profile: str = "demo", overrides: dict | None = None
              ) -> dict[str, Any]:
    """The code location's resources, writing under ``out`` (asset files in ``out/assets``)."""
    return make_resources(profile, str(out), overrides or {})


class Staged:
    """The runs of ``materialize``, read as one: what a test asks of one run's result."""

    def __init__(self, runs: list[dg.ExecuteInProcessResult]) -> None:
        self.runs = runs

    @property
    def success(self) -> bool:
        return all(run.success for run in self.runs)

    @property
    def run_ids(self) -> list[str]:
        return [run.run_id for run in self.runs]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [e for run in self.runs for e in run.get_asset_check_evaluations()]

    def get_asset_materialization_events(self) -> list[Any]:
        return [e for run in self.runs for e in run.get_asset_materialization_events()]

    def asset_materializations_for_node(self, node: str) -> list[Any]:
        return [m for run in self.runs for m in run.asset_materializations_for_node(node)]


def materialize(assets: list[Any], selection: list[Any], **kwargs: Any) -> Staged:
    """``dg.materialize`` of ``selection`` (asset keys or assets), one run per partition set of the
    selected adapter assets (``jobs.staged.stages``: the whole-task jobs' rule), each over
    its partition set's partitions."""
    tags = kwargs.pop("tags", None) or {}
    wanted = [k for item in selection for k in (
        item.keys if isinstance(item, dg.AssetsDefinition)
        else [dg.AssetKey.from_coercible(item)])]
    runs = []
    for keys, partition_tags in stages(assets, wanted):
        run = dg.materialize(assets, selection=keys, tags={**tags, **partition_tags}, **kwargs)
        runs.append(run)
        if not run.success:
            break
    return Staged(runs)


def by_name(items: list[Any], task: str, *names: str) -> list[Any]:
    """Assets of ``task`` whose key ends in one of ``names``."""
    return [a for a in items
            if isinstance(a, dg.AssetsDefinition) and a.key.path[0] == task
            and a.key.path[-1] in names]


def checks_of(checks: list[dg.AssetChecksDefinition], task: str,
              *names: str) -> list[dg.AssetChecksDefinition]:
    """Checks on the assets of ``task`` whose key ends in one of ``names``."""
    out = []
    for check in checks:
        key = next(iter(check.check_keys)).asset_key
        if key.path[0] == task and key.path[-1] in names:
            out.append(check)
    return out


def asset_path(out: Path, *key: str) -> Path:
    """Where the IO manager stores an unpartitioned asset under ``out``."""
    return out.joinpath("assets", *key[:-1], key[-1] + ".parquet")


ONE_SFT_ADAPTER = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                  "strict_grid": None, "eval_questions_per_cell": 3},
    "sampling": {"n": 2, "max_new_tokens": 6},
    "training": {"splits": ["saturated"], "methods": ["sft"], "epochs": 1, "batch_size": 2,
                 "per_device_batch_size": 2, "learning_rate": 1e-2, "max_length": 128,
                 "lora_r": 4, "lora_alpha": 8, "validation_questions_per_cell": 2,
                 "isolate": False, "selection": {"dpo_betas": None, "learning_rates": None},
                 "sweeps": {"rank_weight": None, "rrhf_variants": None, "dpo_beta": None}},
}
"""A chain-sum profile that trains and evaluates one SFT adapter on two saturated questions
(lay ``policy`` over it): the smallest graph that reaches an eval report."""


def adapter_folder(out: Path, name: str, task: str = "chain_sum", split: str = "saturated"
                   ) -> Path:
    """Adapter ``name``'s current key folder under output folder ``out``, as its home's
    ``current`` names it (what the readers resolve)."""
    from saturated_dag.training.folders import current_folder

    folder = current_folder(out / "adapters" / task / split / name)
    assert folder is not None, f"adapter {name} has no current key folder"
    return folder


def seed_adapter_folder(out: Path, name: str, task: str = "chain_sum",
                        split: str = "saturated", key: str = "0123456789abcdef",
                        method: str = "dpo", record: dict | None = None) -> Path:
    """A key folder made current for adapter ``name``, holding what a reader checks
    (``training.folders.check_adapter``): weights, ``result.json`` (where it was trained, its
    cache key and its weights' hash) and ``training_config.json`` (``record`` with the cache
    key and ``method``), for a test that writes a trained adapter by hand."""
    import json

    from saturated_dag.infra.shards import file_fingerprint
    from saturated_dag.training.folders import (
        ADAPTER_WEIGHTS,
        RESULT_FILE,
        key_folder,
        record_current,
    )

    home = out / "adapters" / task / split / name
    folder = key_folder(home, key)
    folder.mkdir(parents=True)
    (folder / ADAPTER_WEIGHTS).write_bytes(f"weights of {name}".encode())
    (folder / "adapter_config.json").write_text("{}")
    (folder / "training_config.json").write_text(json.dumps(
        {**(record or {}), "cache_key": key, "method": method}))
    (folder / RESULT_FILE).write_text(json.dumps(
        {"adapter_dir": str(folder), "best_epoch": (record or {}).get("best_epoch", 1),
         "epochs": [], "log_history": [], "cache_key": key,
         "weights_version": file_fingerprint(folder / ADAPTER_WEIGHTS)}))
    record_current(home, folder)
    return folder


def ancestors(assets: list[Any], key: dg.AssetKey) -> set[dg.AssetKey]:
    """Every asset of ``assets`` upstream of ``key``: what materialising ``key`` needs first."""
    by_key = {k: a for a in assets if isinstance(a, dg.AssetsDefinition) for k in a.keys}
    found: set[dg.AssetKey] = set()
    todo = [key]
    while todo:
        for spec in by_key[todo.pop()].specs:
            for dep in spec.deps:
                if dep.asset_key in by_key and dep.asset_key not in found:
                    found.add(dep.asset_key)
                    todo.append(dep.asset_key)
    return found
