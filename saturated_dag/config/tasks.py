"""The task sections: chain sum's question grids and GSM8K's files (``chain_sum``, ``gsm8k``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from saturated_dag.config.base import Strict, TrainSplit
from saturated_dag.tasks import chain_sum
from saturated_dag.tasks.chain_sum import grid_of

TaskName = Literal["chain_sum", "gsm8k"]

GRID_LIMIT = 99
"""The largest number of terms or digits a chain-sum cell may have."""

MAX_PER_CELL = chain_sum.SEED_SPACING // 100
"""The most questions a profile may ask of one chain-sum cell: a hundredth of
``chain_sum.SEED_SPACING``, the items a cell's seed may draw before the next seed's."""

TRAIN_SPLITS_HELP = """The training splits this task trains, main rows and sweeps alike: a row
whose split is not listed has no assets for this task (a listed split no row trains adds
nothing). None: every split ``training`` trains. The paper trains GSM8K on Q_easy only (Sec.
4.3, Table 2): App. C's hard split, Table 7 and the ablations are chain sum's (``paper``:
``gsm8k.train_splits: [saturated]``)."""


class GridSpec(Strict):
    """Inclusive ranges of terms and digits, minus excluded (terms, digits) cells."""

    terms: tuple[int, int]
    digits: tuple[int, int]
    exclude: list[tuple[int, int]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _in_range(self) -> GridSpec:
        """reasoning-gym's chain sum takes 1-99 terms and digits; a range outside it, or
        reversed, fails at the pool step hours later, so it is refused here."""
        for name in ("terms", "digits"):
            low, high = getattr(self, name)
            if not 1 <= low <= high <= GRID_LIMIT:
                raise ValueError(f"{name}: [{low}, {high}] must be an increasing range within "
                                 f"1-{GRID_LIMIT}")
        return self

    def points(self) -> list[chain_sum.GridPoint]:
        """The grid's (terms, digits) points, row-major, without ``exclude``."""
        return chain_sum.grid_points(self.terms, self.digits, self.exclude)


Grid = Literal["D", "D_prime"] | GridSpec


class ChainSumSettings(Strict):
    """The target pool D, the strictly easier pool D_prime and the held-out eval set."""

    grid: Grid = "D"
    questions_per_cell: int = Field(3000, ge=1, le=MAX_PER_CELL)
    strict_grid: Grid | None = "D_prime"
    strict_questions_per_cell: int = Field(3000, ge=1, le=MAX_PER_CELL)
    eval_grid: Grid | None = None  # None: the grid of D
    eval_questions_per_cell: int = Field(8, ge=1, le=MAX_PER_CELL)
    eval_source: str | None = None
    """The paper's fixed eval set instead of a generated one: a hub id
    (``hannoh/chainsum_eval``, 200 questions), a ``datasets``-loadable folder or a JSONL file
    with the same columns. None: ``eval_questions_per_cell`` questions drawn per eval cell."""
    eval_limit: int | None = Field(None, ge=1)
    """With ``eval_source``: evaluate its first ``eval_limit`` rows (the paper: 200)."""
    seed: int = Field(0, ge=0)
    train_splits: list[TrainSplit] | None = Field(None, min_length=1,
                                                  description=TRAIN_SPLITS_HELP)

    @model_validator(mode="after")
    def _grids_not_empty(self) -> ChainSumSettings:
        for name in ("grid", "strict_grid", "eval_grid"):
            grid = getattr(self, name)
            if grid is not None:
                try:
                    grid_of(grid)
                except ValueError as err:
                    raise ValueError(f"{name}: {err}") from None
        return self


class Gsm8kSettings(Strict):
    """Local folder with train.jsonl/test.jsonl (relative to the working directory) or hub id."""

    source: str = "../shared/data/gsm8k"
    train_limit: int | None = Field(None, ge=1)
    test_limit: int | None = Field(None, ge=1)
    train_splits: list[TrainSplit] | None = Field(None, min_length=1,
                                                  description=TRAIN_SPLITS_HELP)
