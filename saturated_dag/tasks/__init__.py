"""Task registry: which questions each pool of a profile holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from saturated_dag.tasks import chain_sum, gsm8k
from saturated_dag.tasks.base import Question

if TYPE_CHECKING:
    from saturated_dag.config import Profile

TASKS = ("chain_sum", "gsm8k")


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")


def training_questions(profile: Profile, task: str) -> list[Question]:
    """The generation pool's questions: D (and D' for chain sum; GSM8K train for gsm8k)."""
    _check_task(task)
    if task == "gsm8k":
        return _gsm8k_train_and_validation(profile)[0]
    from saturated_dag.config import grid_cells

    cfg = profile.chain_sum
    questions = chain_sum.build_pool("D", grid_cells(cfg.grid), cfg.questions_per_cell, cfg.seed)
    if cfg.strict_grid is not None:
        questions += chain_sum.build_pool(
            "D_prime", grid_cells(cfg.strict_grid), cfg.strict_questions_per_cell, cfg.seed
        )
    return questions


def _gsm8k_train_and_validation(profile: Profile) -> tuple[list[Question], list[Question]]:
    """The last lines of train.jsonl are the validation set; the pool never sees them."""
    rows = gsm8k.load_split(profile.gsm8k.source, "train")
    held_out = profile.training.gsm8k_validation_questions
    if held_out >= len(rows):
        raise ValueError(f"gsm8k_validation_questions ({held_out}) leaves no training question "
                         f"of {len(rows)}")
    pool = rows[: len(rows) - held_out][: profile.gsm8k.train_limit]
    return pool, rows[len(rows) - held_out :]


def validation_questions(profile: Profile, task: str) -> list[Question]:
    """Held out from training and eval alike: the checkpoint-selection set (App. B)."""
    _check_task(task)
    if task == "gsm8k":
        return _gsm8k_train_and_validation(profile)[1]
    from saturated_dag.config import grid_cells

    cfg = profile.chain_sum
    used = chain_sum.expressions(training_questions(profile, task))
    used |= chain_sum.expressions(eval_questions(profile, task))
    return chain_sum.build_pool("validation", grid_cells(cfg.grid),
                                profile.training.validation_questions_per_cell, cfg.seed,
                                exclude_expressions=used)


def eval_questions(profile: Profile, task: str) -> list[Question]:
    """The held-out eval set, disjoint from every training pool of the profile."""
    _check_task(task)
    if task == "gsm8k":
        return gsm8k.load_split(profile.gsm8k.source, "test", profile.gsm8k.test_limit)
    from saturated_dag.config import grid_cells

    cfg = profile.chain_sum
    used = chain_sum.expressions(training_questions(profile, task))
    grid = cfg.eval_grid if cfg.eval_grid is not None else cfg.grid
    return chain_sum.build_pool(
        "eval", grid_cells(grid), cfg.eval_questions_per_cell, cfg.seed, exclude_expressions=used
    )


__all__ = ["TASKS", "Question", "eval_questions", "training_questions"]


def has_strict_pool(profile: Profile, task: str) -> bool:
    """Whether the task has a strictly easier pool D' (only chain sum, when configured)."""
    _check_task(task)
    return task == "chain_sum" and profile.chain_sum.strict_grid is not None
