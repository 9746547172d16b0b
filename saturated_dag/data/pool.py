"""The generation pool: n sampled completions per question, verified, one row each.

With a ``ShardStore`` the questions are sampled in fixed shards, each with its own seed
(``shards.shard_seed``) and written as soon as it is verified, so a crashed run resumes where it
stopped and an unchanged re-run reuses every shard (``saturated_dag.infra.shards``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import polars as pl

from saturated_dag.generation.base import GenerationBackend, Sample, SamplingParams
from saturated_dag.infra.log import LogFn, time_left
from saturated_dag.infra.shards import ShardStore, run_shards, shard_seed
from saturated_dag.schemas import schema
from saturated_dag.tasks.base import Question
from saturated_dag.tasks.verification import AnswerCheck, verify_many

POOL_SCHEMA = schema("generation_pool")  # declared once, in saturated_dag/schemas.py
"""One row per sampled completion. ``terms``/``digits`` are null for tasks without them,
``answer`` is null where none was extracted, ``mean_entropy`` where the backend gave none."""
POOL_COLUMNS = list(POOL_SCHEMA.names())

BackendSource = GenerationBackend | Callable[[], GenerationBackend]
"""A backend, or a function that loads one: a fully cached stage never loads the model."""


def resolve_backend(source: BackendSource) -> GenerationBackend:
    """The backend itself, or the one its loader returns (loaded only when called)."""
    return source if hasattr(source, "sample") else source()  # type: ignore[operator,return-value]


def generate_pool(
    questions: Sequence[Question],
    backend: BackendSource,
    params: SamplingParams,
    verify_workers: int = 1,
    log: LogFn | None = None,
    progress_every: int = 10,
    store: ShardStore | None = None,
    shard_size: int | None = None,
    answer_check: AnswerCheck = "math_verify",
) -> pl.DataFrame:
    """Sample ``params.n`` completions for every question and check each answer.

    Returns a polars frame of ``POOL_SCHEMA``: questions in the given order, each question's
    samples in the backend's order.

    ``answer_check``: how answers are read (``saturated_dag.tasks.verification``); a store's key
    must include it, since it decides the stored ``correct`` column.

    ``shard_size``: questions per shard, each sampled with ``shard_seed(params.seed, i)``;
    ``None`` samples everything at once with ``params.seed`` (no store allowed then).
    ``store``: keep finished shards there and reuse those already present (its
    ``last_stats`` says how many).
    """
    if not questions:
        raise ValueError("no questions to sample: the task's pools are empty")
    if shard_size is None:
        if store is not None:
            raise ValueError("a shard store needs a shard_size")
        return _sample_and_verify(questions, resolve_backend(backend), params, verify_workers, log,
                                  progress_every, answer_check)
    loaded: list[GenerationBackend] = []

    def compute(index: int, part: Sequence[Question]) -> pl.DataFrame:
        if not loaded:
            loaded.append(resolve_backend(backend))
        shard_params = replace(params, seed=shard_seed(params.seed, index))
        return _sample_and_verify(part, loaded[0], shard_params, verify_workers, log,
                                  progress_every, answer_check)

    frame, _stats = run_shards(store, list(questions), shard_size, compute, log)
    return frame


def progress_logger(say: LogFn, progress_every: int = 10) -> Callable[[int, int], None]:
    """``progress(done, total)`` that logs every ``progress_every`` per cent, with the time
    the sampling still needs at its pace since this logger was made (right before it
    starts)."""
    last = [0]
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        step = max(1, total * progress_every // 100)
        if done - last[0] >= step or done == total:
            last[0] = done
            left = time_left(time.monotonic() - started, done, total)
            say(f"generated {done}/{total} completions ({100 * done // total}%, {left})")

    return progress


def _sample_and_verify(
    questions: Sequence[Question],
    backend: GenerationBackend,
    params: SamplingParams,
    verify_workers: int,
    log: LogFn | None,
    progress_every: int,
    answer_check: AnswerCheck,
) -> pl.DataFrame:
    say = log or (lambda _msg: None)
    prompts = [backend.render(q.prompt_text) for q in questions]
    say(f"sampling {len(prompts)} questions x n={params.n} = {len(prompts) * params.n} "
        f"completions on {backend.name}")
    samples = backend.sample(prompts, params, progress=progress_logger(say, progress_every))
    return verified_frame(questions, prompts, samples, params, verify_workers, say,
                          answer_check)


def verified_frame(
    questions: Sequence[Question],
    prompts: Sequence[str],
    samples: Sequence[Sequence[Sample]],
    params: SamplingParams,
    verify_workers: int,
    say: LogFn,
    answer_check: AnswerCheck,
) -> pl.DataFrame:
    """The pool's rows (``POOL_SCHEMA``) of sampled ``questions``, each answer checked."""
    rows = []
    for question, prompt, group in zip(questions, prompts, samples, strict=True):
        if len(group) != params.n:
            raise RuntimeError(
                f"backend returned {len(group)} samples for {question.question_id}, "
                f"expected {params.n}"
            )
        for sample in group:
            rows.append({
                "question_id": question.question_id,
                "task": question.task,
                "pool": question.pool,
                "cell": question.cell,
                "terms": question.meta.get("terms"),
                "digits": question.meta.get("digits"),
                "problem": question.problem,
                "prompt": prompt,
                "gold": question.gold,
                "sample_index": sample.sample_index,
                "completion": sample.text,
                "num_tokens": sample.num_tokens,
                "finish_reason": sample.finish_reason,
                "mean_entropy": sample.mean_entropy,
            })
    say(f"verifying {len(rows)} completions with Math-Verify ({answer_check})")
    verdicts = verify_many([r["completion"] for r in rows], [r["gold"] for r in rows],
                           workers=verify_workers, mode=answer_check)
    for row, verdict in zip(rows, verdicts, strict=True):
        row["answer"] = verdict.answer
        row["correct"] = verdict.correct
    return pl.DataFrame(rows, schema=POOL_SCHEMA)
