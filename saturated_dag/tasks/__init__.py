"""Task registry: which questions each pool of a profile holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from saturated_dag.tasks import chain_sum, gsm8k
from saturated_dag.tasks.base import Question

if TYPE_CHECKING:
    from saturated_dag.config import GridSpec, Profile

TASKS = ("chain_sum", "gsm8k")


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")


def training_questions(profile: Profile, task: str) -> list[Question]:
    """The generation pool's questions: D (and D_prime for chain sum; GSM8K train for gsm8k)."""
    _check_task(task)
    if task == "gsm8k":
        return _gsm8k_train_and_validation(profile)[0]
    from saturated_dag.config import grid_cells

    cfg = profile.chain_sum
    # A fixed eval set (eval_source) is given, so the pools skip its expressions; a generated
    # one is drawn around the pools instead (eval_questions), leaving the pools' draws as is.
    fixed = (chain_sum.expressions(_fixed_eval_set(profile))
             if cfg.eval_source is not None else frozenset())
    questions = chain_sum.build_pool("D", grid_cells(cfg.grid), cfg.questions_per_cell, cfg.seed,
                                     exclude_expressions=fixed)
    if cfg.strict_grid is not None:
        questions += chain_sum.build_pool(
            "D_prime", grid_cells(cfg.strict_grid), cfg.strict_questions_per_cell, cfg.seed,
            exclude_expressions=fixed,
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


def _fixed_eval_set(profile: Profile) -> list[Question]:
    """``chain_sum.eval_source``'s first ``eval_limit`` rows (all when no limit is set)."""
    cfg = profile.chain_sum
    assert cfg.eval_source is not None
    rows = chain_sum.load_eval_set(cfg.eval_source)
    if cfg.eval_limit is not None and cfg.eval_limit > len(rows):
        raise ValueError(f"chain_sum.eval_limit is {cfg.eval_limit} but {cfg.eval_source} has "
                         f"only {len(rows)} rows")
    return rows[: cfg.eval_limit]


def eval_questions(profile: Profile, task: str) -> list[Question]:
    """The held-out eval set, disjoint from every training pool of the profile.

    Chain sum: the fixed set ``chain_sum.eval_source`` when given (the paper's
    ``hannoh/chainsum_eval``), else ``eval_questions_per_cell`` drawn per cell of the eval grid.
    """
    _check_task(task)
    if task == "gsm8k":
        return gsm8k.load_split(profile.gsm8k.source, "test", profile.gsm8k.test_limit)
    from saturated_dag.config import grid_cells

    cfg = profile.chain_sum
    if cfg.eval_source is not None:
        return _fixed_eval_set(profile)
    used = chain_sum.expressions(training_questions(profile, task))
    grid = cfg.eval_grid if cfg.eval_grid is not None else cfg.grid
    return chain_sum.build_pool(
        "eval", grid_cells(grid), cfg.eval_questions_per_cell, cfg.seed, exclude_expressions=used
    )


def _grid_label(grid: str | GridSpec) -> str:
    """``D``, or ``terms 3-5 x digits 1-2`` (minus excluded cells) for an explicit grid."""
    if isinstance(grid, str):
        return grid
    label = f"terms {grid.terms[0]}-{grid.terms[1]} x digits {grid.digits[0]}-{grid.digits[1]}"
    excluded = [chain_sum.cell_name((t, d)) for t, d in grid.exclude]
    return label + (f" minus {', '.join(excluded)}" if excluded else "")


def eval_set_name(profile: Profile, task: str, count: int) -> str:
    """What a results table was evaluated on, in words, with its ``count`` of questions.

    Tables of different eval sets are not comparable (the paper's fixed chain-sum set is far
    harder than a uniform draw over D), so every table says which one it used; a rehearsal's
    says that its correctness is a coin's (``verification.REHEARSAL_CAVEAT``).
    """
    _check_task(task)
    name = _eval_set_words(profile, task, count)
    if profile.answer_check == "rehearsal_coin":
        from saturated_dag.verification import REHEARSAL_CAVEAT

        name += f"; {REHEARSAL_CAVEAT}"
    return name


def _eval_set_words(profile: Profile, task: str, count: int) -> str:
    if task == "gsm8k":
        cfg = profile.gsm8k
        limit = f", the first {cfg.test_limit}" if cfg.test_limit is not None else ""
        return f"GSM8K test{limit} ({count} questions, {cfg.source})"
    cfg_cs = profile.chain_sum
    if cfg_cs.eval_source is not None:
        return f"{cfg_cs.eval_source} ({count} questions)"
    grid = cfg_cs.eval_grid if cfg_cs.eval_grid is not None else cfg_cs.grid
    return (f"generated: {cfg_cs.eval_questions_per_cell} per cell over {_grid_label(grid)} "
            f"({count} questions, seed {cfg_cs.seed})")


__all__ = ["TASKS", "Question", "eval_questions", "eval_set_name", "training_questions"]


def has_strict_pool(profile: Profile, task: str) -> bool:
    """Whether the task has a strictly easier pool D_prime (only chain sum, when configured)."""
    _check_task(task)
    return task == "chain_sum" and profile.chain_sum.strict_grid is not None


def can_train_split(profile: Profile, task: str, split: str) -> bool:
    """Whether the task trains on a split: it must have the questions (strict_saturated needs
    D_prime) and the task's ``train_splits``, where set, must list it. The one rule the asset graph,
    the plan and the cost table read."""
    _check_task(task)
    chosen = getattr(profile, task).train_splits
    if chosen is not None and split not in chosen:
        return False
    return split != "strict_saturated" or has_strict_pool(profile, task)
