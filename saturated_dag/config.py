"""Profiles: plain YAML a user can copy and edit, validated before any model loads.

``load_profile("demo")`` reads ``saturated_dag/profiles/demo.yaml``; any other argument is a
path to a YAML file of the same shape. Every error names the field, the bad value and what
is allowed (pydantic's message), prefixed with the profile it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from saturated_dag.generation.base import SamplingParams
from saturated_dag.tasks import chain_sum

PROFILE_DIR = Path(__file__).parent / "profiles"
TaskName = Literal["chain_sum", "gsm8k"]


class ProfileError(ValueError):
    """An invalid profile or run config."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GridSpec(_Strict):
    """Inclusive ranges of terms and digits, minus excluded (terms, digits) cells."""

    terms: tuple[int, int]
    digits: tuple[int, int]
    exclude: list[tuple[int, int]] = Field(default_factory=list)

    def cells(self) -> list[chain_sum.Cell]:
        return chain_sum.grid_cells(self.terms, self.digits, self.exclude)


Grid = Literal["D", "D_prime"] | GridSpec


def grid_cells(grid: Grid) -> list[chain_sum.Cell]:
    return list(chain_sum.PRESETS[grid]) if isinstance(grid, str) else grid.cells()


_MAX_PER_CELL = chain_sum.SEED_SPACING // 100


class ChainSumSettings(_Strict):
    """The target pool D, the strictly easier pool D' and the held-out eval set."""

    grid: Grid = "D"
    questions_per_cell: int = Field(3000, ge=1, le=_MAX_PER_CELL)
    strict_grid: Grid | None = "D_prime"
    strict_questions_per_cell: int = Field(3000, ge=1, le=_MAX_PER_CELL)
    eval_grid: Grid | None = None  # None: the grid of D
    eval_questions_per_cell: int = Field(8, ge=1, le=_MAX_PER_CELL)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _grids_not_empty(self) -> ChainSumSettings:
        for name in ("grid", "strict_grid", "eval_grid"):
            grid = getattr(self, name)
            if grid is not None:
                try:
                    grid_cells(grid)
                except ValueError as err:
                    raise ValueError(f"{name}: {err}") from None
        return self


class Gsm8kSettings(_Strict):
    """Local folder with train.jsonl/test.jsonl (relative to the working directory) or hub id."""

    source: str = "../shared/data/gsm8k"
    train_limit: int | None = Field(None, ge=1)
    test_limit: int | None = Field(None, ge=1)


class VllmSettings(_Strict):
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    enforce_eager: bool = False
    max_model_len: int | None = Field(None, ge=16)
    tensor_parallel_size: int = Field(1, ge=1)
    enable_prefix_caching: bool = True


class PolicySettings(_Strict):
    """The policy model and the backend that serves it."""

    backend: Literal["transformers", "vllm"] = "transformers"
    model: str
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    batch_size: int = Field(64, ge=1)
    chat_template: Literal["auto", "always", "never"] = "auto"
    trust_remote_code: bool = False
    vllm: VllmSettings = VllmSettings()


class SamplingSettings(_Strict):
    """The paper's sampling (App. B.1)."""

    n: int = Field(8, ge=1)
    temperature: float = Field(0.6, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_new_tokens: int = Field(2048, ge=1)
    seed: int = Field(0, ge=0)

    def params(self) -> SamplingParams:
        return SamplingParams(**self.model_dump())


class PartitionSettings(_Strict):
    """App. A.1: saturated p=1, hard p<=1/4, the middle excluded."""

    saturated_min_pass: float = Field(1.0, gt=0, le=1)
    hard_max_pass: float = Field(0.25, ge=0, lt=1)

    @model_validator(mode="after")
    def _ordered(self) -> PartitionSettings:
        if self.hard_max_pass >= self.saturated_min_pass:
            raise ValueError(
                f"hard_max_pass ({self.hard_max_pass}) must be below saturated_min_pass "
                f"({self.saturated_min_pass})"
            )
        return self


class Profile(_Strict):
    name: str
    description: str = ""
    tasks: list[TaskName] = Field(min_length=1)
    chain_sum: ChainSumSettings = ChainSumSettings()
    gsm8k: Gsm8kSettings = Gsm8kSettings()
    policy: PolicySettings
    sampling: SamplingSettings = SamplingSettings()
    partitions: PartitionSettings = PartitionSettings()
    verify_workers: int = Field(1, ge=1)


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(err: ValidationError, source: str) -> str:
    lines = [f"invalid profile {source}:"]
    for item in err.errors():
        field = ".".join(str(p) for p in item["loc"]) or "<root>"
        lines.append(f"  {field}: {item['msg']} (got {item.get('input')!r})")
    return "\n".join(lines)


def parse_profile(data: dict[str, Any], source: str = "<dict>") -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(_describe(err, source)) from None


def load_profile(name_or_path: str, overrides: dict[str, Any] | None = None) -> Profile:
    """A named profile (``demo``, ``paper``) or a YAML file, with optional nested overrides."""
    path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ProfileError(
                f"unknown profile {name_or_path!r}: not one of {available_profiles()} "
                "and not a YAML file"
            )
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ProfileError(f"profile {path} must be a YAML mapping, got {type(data).__name__}")
    return parse_profile(_merge(data, overrides or {}), str(path))
