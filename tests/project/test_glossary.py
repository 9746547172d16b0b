"""docs/glossary.md promises one meaning per word: the meanings it retired stay retired.

Three words had a second meaning in the code. "cell" is a row of the experiment plan (a table's
(split, method, scorer), or a sweep's row); a point of chain sum's question grid (terms x digits) is
a ``GridPoint``. "grid" is only that question grid: what a cell trains are its configurations (from
the lists ``training.selection`` holds), an adapter's Dagster partition key is its partition key,
and cells with the same keys are a partition set. "pool" is the generation pool; processes started
side by side are "workers", and Dagster's concurrency pool that model steps claim is "the gpu
concurrency limit". This test searches the Python source of ``saturated_dag/``, ``assets/``,
``jobs/`` and ``resources/`` for the retired forms (``RETIRED``) and fails naming each hit's file
and line, with the word that replaces it.

Pure file reading: no project import, no model.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

SCANNED = ("saturated_dag", "assets", "jobs", "resources")


def _pool_named_process_pools(_text: str, tree: ast.AST) -> Iterator[int]:
    """Lines binding a ``ProcessPoolExecutor`` (or what a function returning one returns) to a
    name containing ``pool``: ``_POOLS: dict[int, ProcessPoolExecutor] = {}``, ``def _pool()
    -> ProcessPoolExecutor``, ``pool, lines = _pool(n)``, ``with ProcessPoolExecutor() as
    pool``. ``concurrent.futures``' own names (``BrokenProcessPool``) are not bindings."""

    def pooly(node: ast.AST | None) -> bool:
        names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)] if node else []
        return any("pool" in name.lower() for name in names)

    def executor(node: ast.AST | None) -> bool:
        return node is not None and "ProcessPoolExecutor" in ast.unparse(node)

    factories = {f.name for f in ast.walk(tree)
                 if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and executor(f.returns)}

    def made(value: ast.AST | None) -> bool:
        return executor(value) or (isinstance(value, ast.Call)
                                   and isinstance(value.func, ast.Name)
                                   and value.func.id in factories)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name in factories and "pool" in node.name.lower():
                yield node.lineno
        elif isinstance(node, ast.Assign):
            if made(node.value) and any(pooly(t) for t in node.targets):
                yield node.lineno
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            annotation = getattr(node, "annotation", None)
            if (made(node.value) or executor(annotation)) and pooly(node.target):
                yield node.lineno
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if made(item.context_expr) and pooly(item.optional_vars):
                    yield node.lineno


def _lines_matching(pattern: str) -> Callable[[str, ast.AST], Iterator[int]]:
    regex = re.compile(pattern)

    def find(text: str, _tree: ast.AST) -> Iterator[int]:
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                yield number
    return find


@dataclass(frozen=True)
class Retired:
    name: str
    """The retired form."""
    replaced_by: str
    """The meaning (and name) that replaces it, as docs/glossary.md gives it."""
    find: Callable[[str, ast.AST], Iterator[int]]
    """The lines of a module's source (text, parsed tree) that use the retired form."""


RETIRED: tuple[Retired, ...] = (
    Retired("`Cell` as the type of a chain-sum grid point (`Cell = tuple[int, int]`, "
            "`chain_sum.Cell`, imported from `chain_sum`)",
            "`GridPoint` (a point of the question grid: terms x digits); `Cell` is a row of "
            "the experiment plan (`saturated_dag.experiments.Cell`)",
            _lines_matching(r"\bCell\s*=\s*tuple\b|\bchain_sum\.Cell\b"
                            r"|\bchain_sum import\b.*\bCell\b")),
    Retired("`cell_seed`, `cell_name`, `grid_cells`: a grid point called a cell",
            "`point_seed`, `point_name`, `grid_points`",
            _lines_matching(r"\b(?:cell_seed|cell_name|grid_cells)\b")),
    Retired("a process (or thread, or worker) pool in prose",
            "workers (worker processes; the library's threads)",
            _lines_matching(r"(?i)\b(?:process|thread|worker)[- ]pools?\b")),
    Retired("a `ProcessPoolExecutor` bound to a name containing `pool` (`_POOLS`, `_pool()`, "
            "`pool = `, `as pool`)",
            "workers (`_WORKERS`, `_workers(count)`)",
            _pool_named_process_pools),
    Retired("Dagster's concurrency pool called a pool in prose (the `gpu` pool, the gpu "
            "concurrency pool)",
            "the gpu concurrency limit",
            _lines_matching(r"(?i)\bgpu`{0,2}\s+(?:concurrency\s+)?pools?\b"
                            r"|\bconcurrency\s+pools?\b")),
    Retired("a priority level called a stage (`POLICY_STAGE`, `TEACHER_STAGE`, `JUDGE_STAGE`)",
            "the engine the level keeps loaded (`POLICY_ENGINE`, `TEACHER_ENGINE`, "
            "`JUDGE_ENGINE`); a stage is a cached, sharded step (`saturated_dag.infra.shards`)",
            _lines_matching(r"\b(?:POLICY|TEACHER|JUDGE)_STAGE\b")),
    Retired("`per_cell`, `--per-cell`: questions per grid point called per cell (the kept "
            "profile settings `questions_per_cell` and its kin aside)",
            "`per_point`, `--per-point`",
            _lines_matching(r"\bper_cell\b|--per-cell\b")),
    Retired("a cell's configurations called a grid in names (`SelectionGrid`, `GRID`, "
            "`GRID_METHODS`, `grid_key`, `cells_by_grid`, `grid_groups`, `grid_table`, "
            "`TaskPlan.grids`, `plan.grid(cell)`)",
            "the configurations, from the lists `training.selection` holds (`SelectionSettings`, "
            "`SELECTION_LISTS`); an adapter's partition key (`adapter_partition_key`); a "
            "partition set (`TaskPlan.partitions`, `cells_by_partitions`, `partition_groups`)",
            _lines_matching(r"\b(?:SelectionGrid|GRID|GRID_METHODS|grid_keys?|cells_by_grid"
                            r"|grid_groups|grid_table|grid_summary|GRID_COLUMNS)\b"
                            r"|\.grids\b|\.grid\(\w+\)")),
    Retired("a cell's configurations called a grid in prose (the selection grid, a grid key, "
            "grid order, a cell's grid, one part per grid)",
            "its configurations (or the selection); a partition key; configuration order; a "
            "partition set",
            _lines_matching(r"(?i)\bselection[- ]grids?\b"
                            r"|\bgrid[- ](?:keys?|configurations?|order|adapters?|batch)\b"
                            r"|\b(?:cell|cell's|cells'|method's|DPO's) grids?\b"
                            r"|\bper (?:distinct )?grid\b(?!\s+point)")),
    Retired("a job that is not a Dagster job: a training's or an eval report's work "
            "(`TrainingJob`, `ShardJob`, `run_jobs`, `train_job`, `training_job`, "
            "`saturated_dag.training.job`, training jobs in prose)",
            "a training request (`TrainingRequest`, `run_trainings`, `train_request`, "
            "`adapter_request`); an eval report's shards to sample (`ReportShards`)",
            _lines_matching(r"\b(?:TrainingJob|ShardJob|run_jobs|train_job|training_job)\b"
                            r"|\btraining\.job\b|(?i:\btraining jobs?\b)")),
)
"""Every retired form, with the meaning that replaces it."""


def sources() -> list[Path]:
    return sorted(path for top in SCANNED for path in (REPO_ROOT / top).rglob("*.py"))


def hits() -> dict[tuple[str, str], list[int]]:
    """(file, retired form) -> the lines that use it, over every scanned module."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sources():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        where = path.relative_to(REPO_ROOT).as_posix()
        for retired in RETIRED:
            lines = sorted(set(retired.find(text, tree)))
            if lines:
                found[(where, retired.name)] = lines
    return found


def test_the_retired_meanings_are_not_used() -> None:
    by_name = {r.name: r for r in RETIRED}
    new = []
    found = hits()
    for (where, name), lines in sorted(found.items()):
        new += [f"{where}:{line}: {name}; use {by_name[name].replaced_by}" for line in lines]
    assert not new, "\n".join(
        ["retired meanings (docs/glossary.md, 'Words with one meaning'):", *new])


def test_the_search_finds_each_retired_form() -> None:
    """Each pattern catches the form it names (a search that finds nothing proves nothing)."""
    samples = {
        RETIRED[0].name: "Cell = tuple[int, int]  # (terms, digits)\n"
                         "from saturated_dag.tasks.chain_sum import Cell, GridSpec\n"
                         "def f(exclude: Iterable[chain_sum.Cell] = ()) -> list[int]: ...\n",
        RETIRED[1].name: "seed = cell_seed(0, 'D', (6, 6))\n",
        RETIRED[2].name: "'''Verify many completions; over a process pool when large.'''\n",
        RETIRED[3].name: "from concurrent.futures import ProcessPoolExecutor\n"
                         "_POOLS: dict[int, ProcessPoolExecutor] = {}\n"
                         "def _pool(n) -> ProcessPoolExecutor: ...\n"
                         "pool, lines = _pool(2)\n"
                         "with ProcessPoolExecutor(2) as pool:\n    pass\n",
        RETIRED[4].name: "'''its asset takes the ``gpu`` pool, the gpu concurrency pool'''\n",
        RETIRED[5].name: "op_tags=priority(POLICY_STAGE)\n",
        RETIRED[6].name: "def grid_questions(cells, per_cell: int): ...\n"
                         "parser.add_argument('--per-cell', type=int)\n",
        RETIRED[7].name: "class SelectionGrid(_Strict): ...\n"
                         "for name in GRID: ...\n"
                         "keys = {grid_key(t, c, a): a for a in adapters}\n"
                         "for grid, cells in plan.cells_by_grid.items(): ...\n"
                         "parts = grid_groups(profile, tasks)\n"
                         "return plan.grids[cell] | plan.grid(cell)\n",
        RETIRED[8].name: "'''The selection grid's configurations, in grid order.'''\n"
                         "# its grid key names the cell's grid\n"
                         "'''one part per grid of its cells' adapters'''\n",
        RETIRED[9].name: "from saturated_dag.training.job import TrainingJob\n"
                         "records = run_jobs(jobs, policy)  # the training jobs\n"
                         "def train_job(job: TrainingJob): ...\n"
                         "todo = [ShardJob(store, params, None)]\n",
    }
    counts = {RETIRED[0].name: 3, RETIRED[1].name: 1, RETIRED[2].name: 1, RETIRED[3].name: 4,
              RETIRED[4].name: 1, RETIRED[5].name: 1, RETIRED[6].name: 2, RETIRED[7].name: 6,
              RETIRED[8].name: 3, RETIRED[9].name: 4}
    for retired in RETIRED:
        text = samples[retired.name]
        assert len(set(retired.find(text, ast.parse(text)))) == counts[retired.name], retired.name
    clean = ("from concurrent.futures import ProcessPoolExecutor\n"
             "from concurrent.futures.process import BrokenProcessPool\n"
             "GridPoint = tuple[int, int]\n"
             "_WORKERS: dict[int, ProcessPoolExecutor] = {}\n"
             "def _workers(n) -> ProcessPoolExecutor: ...\n"
             "workers, lines = _workers(2)\n"
             "pool = generate_pool(questions)  # the generation pool\n"
             "'''runs under the gpu concurrency limit; the strict_pool D_prime'''\n"
             "op_tags=priority(POLICY_ENGINE)  # a stage: a cached, sharded step\n"
             "questions = point_questions(points, per_point)  # questions_per_cell: kept\n"
             "class SelectionSettings(_Strict): ...  # chain_sum.grid, strict_grid, GridSpec\n"
             "keys = {adapter_partition_key(t, c, a): a for a in adapters}\n"
             "ax.grid(axis='x')  # matplotlib's grid lines\n"
             "'''a grid point of the question grid; one part per partition set'''\n"
             "'''per grid point of the eval grid, in configuration order'''\n"
             "records = run_trainings(requests, policy)  # a Dagster job runs the step\n"
             "def task_cells(profile, task) -> list[Cell]: ...  # a cell: a row of the plan\n")
    tree = ast.parse(clean)
    assert [r.name for r in RETIRED if list(r.find(clean, tree))] == []


def test_the_glossary_names_this_test() -> None:
    glossary = (REPO_ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    assert "tests/project/test_glossary.py" in glossary
