"""reasoning-gym ``chain_sum`` as a grid of (terms, digits) cells, as in the paper's Table 6.

Each cell of each pool draws from its own seed. reasoning-gym's item ``i`` under seed ``s`` is
item ``i-1`` under seed ``s+1`` (it seeds ``Random(s + i)``), so seeds are spaced
``SEED_SPACING`` apart: pools never share an item index as long as a cell draws fewer items
than that. Small cells repeat expressions by chance, so each pool is de-duplicated and the eval
set additionally skips every expression present in a training pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from reasoning_gym.arithmetic.chain_sum import ChainSumConfig, ChainSumDataset

from saturated_dag.tasks.base import Question
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt

TASK = "chain_sum"
SEED_SPACING = 1_000_000
POOL_INDEX = {"D": 0, "D_prime": 1, "eval": 2, "validation": 3}

Cell = tuple[int, int]  # (terms, digits)


def grid_cells(
    terms: tuple[int, int], digits: tuple[int, int], exclude: Iterable[Cell] = ()
) -> list[Cell]:
    """All (terms, digits) cells of the inclusive ranges, minus ``exclude``, row-major."""
    excluded = {tuple(c) for c in exclude}
    cells = [
        (t, d)
        for t in range(terms[0], terms[1] + 1)
        for d in range(digits[0], digits[1] + 1)
        if (t, d) not in excluded
    ]
    if not cells:
        raise ValueError(
            f"chain_sum grid is empty: terms {terms}, digits {digits}, exclude {sorted(excluded)}"
        )
    return cells


# The paper's D (terms and digits 6-10) and D' (3-6, excluding 6/6), Sec. 4.1.
PRESETS: dict[str, list[Cell]] = {
    "D": grid_cells((6, 10), (6, 10)),
    "D_prime": grid_cells((3, 6), (3, 6), exclude=[(6, 6)]),
}


def cell_seed(base_seed: int, pool: str, cell: Cell) -> int:
    """A seed per (pool, cell), far enough from every other that item ranges never overlap."""
    terms, digits = cell
    if not (0 < terms < 100 and 0 < digits < 100):
        raise ValueError(f"chain_sum cell {cell} out of range (terms and digits must be 1-99)")
    slot = POOL_INDEX[pool] * 10_000 + terms * 100 + digits
    return base_seed + slot * SEED_SPACING


def cell_name(cell: Cell) -> str:
    return f"{cell[0]}x{cell[1]}"


def _items(base_seed: int, pool: str, cell: Cell) -> Iterator[tuple[int, dict]]:
    terms, digits = cell
    config = ChainSumConfig(
        min_terms=terms,
        max_terms=terms,
        min_digits=digits,
        max_digits=digits,
        allow_negation=False,
        seed=cell_seed(base_seed, pool, cell),
        size=SEED_SPACING,
    )
    dataset = ChainSumDataset(config)
    for idx in range(SEED_SPACING):
        yield idx, dataset[idx]


def build_pool(
    pool: str,
    cells: list[Cell],
    per_cell: int,
    base_seed: int,
    exclude_expressions: set[str] | frozenset[str] = frozenset(),
) -> list[Question]:
    """``per_cell`` distinct questions from each cell, skipping ``exclude_expressions``.

    Raises when a cell has too few distinct expressions (e.g. 40 questions from 2-term
    1-digit sums with most of them already used by a training pool).
    """
    if per_cell < 1:
        raise ValueError(f"chain_sum questions per cell must be >= 1, got {per_cell}")
    questions: list[Question] = []
    for cell in cells:
        seen: set[str] = set()
        for idx, item in _items(base_seed, pool, cell):
            if len(seen) == per_cell:
                break
            if idx >= 50 * per_cell + 1000:
                raise ValueError(
                    f"chain_sum cell {cell_name(cell)} of pool {pool} has only {len(seen)} "
                    f"distinct unused expressions after {idx} draws; ask for fewer than {per_cell}"
                )
            expression = item["metadata"]["expression"]
            if expression in seen or expression in exclude_expressions:
                continue
            seen.add(expression)
            problem = chain_sum_problem(expression)
            questions.append(
                Question(
                    question_id=f"{TASK}/{pool}/{cell_name(cell)}/{idx}",
                    task=TASK,
                    pool=pool,
                    cell=cell_name(cell),
                    problem=problem,
                    prompt_text=policy_prompt(problem),
                    gold=item["answer"],
                    meta={"terms": cell[0], "digits": cell[1], "expression": expression},
                )
            )
    return questions


def expressions(questions: Iterable[Question]) -> set[str]:
    return {q.meta["expression"] for q in questions}
