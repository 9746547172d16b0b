"""The task registry: which questions each pool of a profile holds, one entry per task.

A task is a ``TaskSpec``: how it builds its training pool, its checkpoint-selection
(validation) set and its eval set from a profile, and how a table names that eval set. Adding
a task is a module of question builders, one ``TaskSpec`` in ``TASKS``, the task's name in
``config.TaskName`` and its settings section on the profile (``docs/extending.md``).

Question sets are built once per profile and process (``_questions``): each adapter asset
keys its cache on the validation set, which on the paper profile took 1.8 s to build (its
training pool is drawn first, to keep the sets disjoint), once per adapter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from saturated_dag.tasks import chain_sum, gsm8k
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.chain_sum import grid_of

if TYPE_CHECKING:
    from saturated_dag.config import GridSpec, Profile

def _chain_sum_training(profile: Profile) -> list[Question]:
    """D, and D_prime when the profile has a strict grid."""
    cfg = profile.chain_sum
    # A fixed eval set (eval_source) is given, so the pools skip its expressions; a generated
    # one is drawn around the pools instead (eval_questions), leaving the pools' draws as is.
    fixed = (chain_sum.expressions(_fixed_eval_set(profile))
             if cfg.eval_source is not None else frozenset())
    seed = chain_sum.draw_seed(cfg.seed, profile.data_seed)  # the draw (Profile.data_seeds)
    questions = chain_sum.build_pool("D", grid_of(cfg.grid), cfg.questions_per_cell, seed,
                                     exclude_expressions=fixed)
    if cfg.strict_grid is not None:
        questions += chain_sum.build_pool(
            "D_prime", grid_of(cfg.strict_grid), cfg.strict_questions_per_cell, seed,
            exclude_expressions=fixed,
        )
    return questions


def _every_draws_expressions(profile: Profile) -> frozenset[str]:
    """The expressions of every draw's training questions (``Profile.data_seeds``): the one
    eval set and the one validation set are drawn around all of them, so they are the same
    for every draw and disjoint from each."""
    return frozenset().union(*(
        chain_sum.expressions(training_questions(profile.for_data_seed(d), "chain_sum"))
        for d in range(profile.data_seeds)))


def _gsm8k_train_and_validation(profile: Profile) -> tuple[list[Question], list[Question]]:
    """The last lines of train.jsonl are the validation set; the pool never sees them."""
    rows = gsm8k.load_split(profile.gsm8k.source, "train")
    held_out = profile.training.gsm8k_validation_questions
    if held_out >= len(rows):
        raise ValueError(f"gsm8k_validation_questions ({held_out}) leaves no training question "
                         f"of {len(rows)}")
    pool = rows[: len(rows) - held_out][: profile.gsm8k.train_limit]
    return pool, rows[len(rows) - held_out :]


def _chain_sum_validation(profile: Profile) -> list[Question]:
    """Drawn per grid point of D around every training and eval expression."""
    cfg = profile.chain_sum
    used = set(_every_draws_expressions(profile))
    used |= chain_sum.expressions(eval_questions(profile, "chain_sum"))
    return chain_sum.build_pool("validation", grid_of(cfg.grid),
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


def _chain_sum_eval(profile: Profile) -> list[Question]:
    """The fixed set ``chain_sum.eval_source`` when given (the paper's
    ``hannoh/chainsum_eval``), else ``eval_questions_per_cell`` drawn per grid point of the
    eval grid around the training pools."""
    cfg = profile.chain_sum
    if cfg.eval_source is not None:
        return _fixed_eval_set(profile)
    used = _every_draws_expressions(profile)
    grid = cfg.eval_grid if cfg.eval_grid is not None else cfg.grid
    return chain_sum.build_pool(
        "eval", grid_of(grid), cfg.eval_questions_per_cell, cfg.seed, exclude_expressions=used
    )


def _grid_label(grid: str | GridSpec) -> str:
    """``D``, or ``terms 3-5 x digits 1-2`` (minus excluded points) for an explicit grid."""
    if isinstance(grid, str):
        return grid
    label = f"terms {grid.terms[0]}-{grid.terms[1]} x digits {grid.digits[0]}-{grid.digits[1]}"
    excluded = [chain_sum.point_name((t, d)) for t, d in grid.exclude]
    return label + (f" minus {', '.join(excluded)}" if excluded else "")


def eval_set_name(profile: Profile, task: str, count: int) -> str:
    """What a results table was evaluated on, in words, with its ``count`` of questions.

    Tables of different eval sets are not comparable (the paper's fixed chain-sum set is far
    harder than a uniform draw over D), so every table says which one it used; a rehearsal's
    says that its correctness is a coin's (``verification.REHEARSAL_CAVEAT``).
    """
    name = task_spec(task).eval_set_words(profile, count)
    if profile.answer_check == "rehearsal_coin":
        from saturated_dag.tasks.verification import REHEARSAL_CAVEAT

        name += f"; {REHEARSAL_CAVEAT}"
    return name


def _gsm8k_eval_set_words(profile: Profile, count: int) -> str:
    cfg = profile.gsm8k
    limit = f", the first {cfg.test_limit}" if cfg.test_limit is not None else ""
    return f"GSM8K test{limit} ({count} questions, {cfg.source})"


def _chain_sum_eval_set_words(profile: Profile, count: int) -> str:
    cfg_cs = profile.chain_sum
    if cfg_cs.eval_source is not None:
        return f"{cfg_cs.eval_source} ({count} questions)"
    grid = cfg_cs.eval_grid if cfg_cs.eval_grid is not None else cfg_cs.grid
    return (f"generated: {cfg_cs.eval_questions_per_cell} per grid point over {_grid_label(grid)} "
            f"({count} questions, seed {cfg_cs.seed})")


def has_strict_pool(profile: Profile, task: str) -> bool:
    """Whether the task has a strictly easier pool D_prime (only chain sum, when configured)."""
    return task_spec(task).strict_pool(profile)


def can_train_split(profile: Profile, task: str, split: str) -> bool:
    """Whether the task trains on a split: it must have the questions (strict_saturated needs
    D_prime) and the task's ``train_splits``, where set, must list it. The one rule the asset graph,
    the plan and the cost table read."""
    task_spec(task)
    chosen = getattr(profile, task).train_splits
    if chosen is not None and split not in chosen:
        return False
    return split != "strict_saturated" or has_strict_pool(profile, task)


def _no_strict_pool(profile: Profile) -> bool:
    return False


def _no_sources(profile: Profile) -> list[str]:
    return []


@dataclass(frozen=True)
class TaskSpec:
    """One task: its question builders (each a function of the profile) and how tables name
    its eval set. ``sources``: the local files its questions are read from (their size and
    modification time key the question cache, so an edited file is read again)."""

    name: str
    training: Callable[[Profile], list[Question]]
    validation: Callable[[Profile], list[Question]]
    eval: Callable[[Profile], list[Question]]
    eval_set_words: Callable[[Profile, int], str]
    strict_pool: Callable[[Profile], bool] = field(default=_no_strict_pool)
    sources: Callable[[Profile], list[str]] = field(default=_no_sources)


def _gsm8k_sources(profile: Profile) -> list[str]:
    folder = Path(profile.gsm8k.source).expanduser()
    return [str(folder / name) for name in gsm8k.SPLIT_FILES.values()] if folder.is_dir() else []


def _chain_sum_sources(profile: Profile) -> list[str]:
    source = profile.chain_sum.eval_source
    return [str(Path(source).expanduser())] if source is not None else []


TASKS: dict[str, TaskSpec] = {
    "chain_sum": TaskSpec(
        "chain_sum", _chain_sum_training, _chain_sum_validation, _chain_sum_eval,
        _chain_sum_eval_set_words,
        strict_pool=lambda profile: profile.chain_sum.strict_grid is not None,
        sources=_chain_sum_sources),
    "gsm8k": TaskSpec(
        "gsm8k", lambda profile: _gsm8k_train_and_validation(profile)[0],
        lambda profile: _gsm8k_train_and_validation(profile)[1],
        lambda profile: gsm8k.load_split(profile.gsm8k.source, "test", profile.gsm8k.test_limit),
        _gsm8k_eval_set_words, sources=_gsm8k_sources),
}
"""Task name -> its entry (``config.TaskName`` lists the same names)."""


def task_spec(task: str) -> TaskSpec:
    """The registered task ``task``; an unknown name is an error naming the known ones."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[task]


_QUESTIONS: dict[str, list[Question]] = {}
_KEEP = 16
"""Question sets kept per process (a code server holds a few profiles; tests many)."""


def _stamp(path: str) -> tuple[str, int, int] | None:
    file = Path(path)
    if not file.is_file():
        return None
    stat = file.stat()
    return (path, stat.st_mtime_ns, stat.st_size)


def _questions(profile: Profile, task: str, kind: str) -> list[Question]:
    """``kind``'s questions of ``task`` under ``profile``, built once per profile content and
    source files; a fresh list each call (callers may slice or extend it)."""
    spec = task_spec(task)
    key = hashlib.sha256(repr((task, kind, profile.model_dump_json(),
                               [_stamp(p) for p in spec.sources(profile)])).encode()).hexdigest()
    if key not in _QUESTIONS:
        built = getattr(spec, kind)(profile)
        if len(_QUESTIONS) >= _KEEP:
            _QUESTIONS.pop(next(iter(_QUESTIONS)))
        _QUESTIONS[key] = built
    return list(_QUESTIONS[key])


def training_questions(profile: Profile, task: str) -> list[Question]:
    """The generation pool's questions: D (and D_prime for chain sum; GSM8K train for gsm8k)."""
    return _questions(profile, task, "training")


def validation_questions(profile: Profile, task: str) -> list[Question]:
    """Held out from training and eval alike: the checkpoint-selection set (App. B)."""
    return _questions(profile, task, "validation")


def eval_questions(profile: Profile, task: str) -> list[Question]:
    """The held-out eval set, disjoint from every training pool of the profile."""
    return _questions(profile, task, "eval")


@dataclass(frozen=True, eq=False)
class QuestionSets:
    """One task's question sets and eval-set name under one profile, as a plan hands them to
    its readers (``experiments.TaskPlan.questions``): each set is built on first use, not when
    the plan is built (a code location loads no dataset), and once per profile content
    (``_questions``); each read is a fresh list."""

    profile: Profile
    task: str

    @property
    def training(self) -> list[Question]:
        """The generation pool's questions (``training_questions``)."""
        return training_questions(self.profile, self.task)

    @property
    def validation(self) -> list[Question]:
        """The checkpoint-selection set (``validation_questions``)."""
        return validation_questions(self.profile, self.task)

    @property
    def eval(self) -> list[Question]:
        """The held-out eval set (``eval_questions``)."""
        return eval_questions(self.profile, self.task)

    def eval_set_name(self, count: int) -> str:
        """The eval set in words, with ``count`` questions (``eval_set_name``)."""
        return eval_set_name(self.profile, self.task, count)


__all__ = ["TASKS", "Question", "QuestionSets", "TaskSpec", "eval_questions", "eval_set_name",
           "task_spec", "training_questions", "validation_questions"]
