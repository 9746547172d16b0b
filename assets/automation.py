"""Lineage-aware recomputation: code versions from the core's source, and automation.

Each asset's code version is its layer's own ``CODE_VERSION`` joined with a hash of the core
modules that hold its logic, so editing the entropy scorer changes the version of the entropy
scores (and only of assets whose logic includes it). Every asset with upstream assets carries
``eager() | code_version_changed()`` (eager alone ignores code changes), and the
``automation`` sensor, on by default, requests what is stale.
"""

import hashlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import dagster as dg

CORE = Path(__file__).resolve().parent.parent / "saturated_dag"
GENERATION = ["generation/base.py", "generation/transformers_backend.py",
              "generation/vllm_backend.py", "generation/models.py", "tasks", "verification.py",
              "shards.py"]
JUDGING = ["scorers/tournament.py", "scorers/judges.py", "scorers/judge_prompts.py"]

# The core modules each asset kind runs, by the last part of its key (or its dataset kind).
LOGIC: dict[str, list[str]] = {
    "base_model": ["generation/models.py"],
    "generation_pool": ["pool.py", *GENERATION],
    "difficulty_partitions": ["partitions.py", "plots.py"],
    "entropy_scores": ["scorers/entropy_scores.py", "generation/entropy.py", "shards.py"],
    "self_judge_scores": [*JUDGING, *GENERATION],
    "strong_judge_scores": [*JUDGING, "scorers/rubric.py", *GENERATION],
    "random_scores": ["scorers/random_scores.py"],
    "scorer_agreement": ["scorers/agreement.py"],
    "dataset": ["preference_data.py", "scorers/selection.py"],
    "adapter": ["training", "losses.py", "evaluation.py", "metrics.py", *GENERATION],
    "eval": ["evaluation.py", "metrics.py", "pool.py", *GENERATION],
    "table": ["result_tables.py", "evaluation.py", "metrics.py"],
}
DATASETS = {"dpo_pairs", "rrhf_groups", "raft_set", "sft_set", "correctness_pairs"}
TABLES = {"results_table", "rank_weight_ablation", "rrhf_variants", "dpo_beta_sweep"}


def logic_of(key: dg.AssetKey) -> str:
    """Which entry of ``LOGIC`` an asset key belongs to."""
    path = key.path
    if path[-1] in LOGIC:
        return path[-1]
    if path[-1] in TABLES:
        return "table"
    for kind in ("adapter", "eval"):
        if kind in path[:-1]:
            return kind
    if DATASETS & set(path):
        return "dataset"
    raise KeyError(f"no code-version rule for asset {key.to_user_string()}")


@cache
def source_hash(entries: tuple[str, ...]) -> str:
    """A short hash of the named core files (folders: every .py file below them)."""
    digest = hashlib.sha256()
    for entry in entries:
        path = CORE / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise FileNotFoundError(f"code-version source {path} does not exist")
        for file in files:
            digest.update(str(file.relative_to(CORE)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


DOWNSTREAM = dg.AutomationCondition.eager() | dg.AutomationCondition.code_version_changed()


def with_lineage(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """Versions from the core's source; automation on every asset that has upstream assets."""

    def update(spec: dg.AssetSpec) -> dg.AssetSpec:
        logic = source_hash(tuple(LOGIC[logic_of(spec.key)]))
        version = f"{spec.code_version or '0'}-{logic}"
        condition = DOWNSTREAM if list(spec.deps) else spec.automation_condition
        return spec.replace_attributes(code_version=version, automation_condition=condition)

    return list(dg.map_asset_specs(update, assets))  # type: ignore[arg-type]


automation_sensor = dg.AutomationConditionSensorDefinition(
    "automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Re-materialises assets whose upstream data or code changed "
    "(eager() | code_version_changed()).",
)
