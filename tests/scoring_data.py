"""A small synthetic generation pool and its partitions for scorer tests.

Chain-sum questions with completions in different styles (so the rubric separates them):
two saturated questions (4/4 correct), one strict-saturated, one hard with 1/4 correct, one
hard with 0/4, and one "saturated" question with a single correct completion (n=1 pool rows
would be odd, so it sits in strict_saturated with 1 correct of 4: skipped by rule).
A missing generation-pass entropy is null, as Parquet stores it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from saturated_dag.data import partitions
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt

STYLES = [
    "{a} + {b} = {s}\n\\boxed{{{s}}}",
    "Let's solve this step by step:\n1. {a} + {b} = {s}\nSo the answer is \\boxed{{{s}}}.",
    "I think maybe {a} + {b} = {s}, probably. \\boxed{{{s}}}",
    "First, plan: add the numbers. Then compute.\n{a} + {b} = {s}\nThe final answer is "
    "\\boxed{{{s}}}.",
]


def make_pool(entropy_nan: bool = False) -> pl.DataFrame:
    specs = [  # (question, pool, a, b, correct flags)
        ("q_sat1", "D", 3, 4, [1, 1, 1, 1]),
        ("q_sat2", "D", 5, 2, [1, 1, 1, 1]),
        ("q_hard1", "D", 6, 7, [1, 0, 0, 0]),
        ("q_hard0", "D", 8, 9, [0, 0, 0, 0]),
        ("q_strict", "D_prime", 1, 2, [1, 1, 1, 1]),
        ("q_one", "D_prime", 2, 2, [1, 0, 0, 0]),
    ]
    rows = []
    for qid, pool, a, b, flags in specs:
        problem = chain_sum_problem(f"{a} + {b}")
        for j, ok in enumerate(flags):
            s = a + b if ok else a + b + 1
            rows.append({
                "question_id": qid, "task": "chain_sum", "pool": pool, "cell": "2x1",
                "terms": 2, "digits": 1, "problem": problem, "prompt": policy_prompt(problem),
                "gold": str(a + b), "sample_index": j,
                "completion": STYLES[j].format(a=a, b=b, s=s), "answer": str(s),
                "correct": bool(ok), "num_tokens": 10 + j, "finish_reason": "stop",
                "mean_entropy": None if entropy_nan else 0.5 + 0.1 * j,
            })
    return pl.DataFrame(rows, schema_overrides={"terms": pl.Int64, "digits": pl.Int64,
                                                "sample_index": pl.Int64,
                                                "num_tokens": pl.Int64,
                                                "mean_entropy": pl.Float64})


def make_partitions(pool: pl.DataFrame) -> pl.DataFrame:
    return partitions.partition(pool, 1.0, 0.25)


def store_pool_and_partitions(out: Path) -> None:
    """``make_pool``'s pool and its partitions as chain sum's stored assets under ``out``, so
    the stages after them can be materialised without sampling."""
    from saturated_dag.infra.atomic import atomic_write_parquet

    pool = make_pool()
    atomic_write_parquet(pool, out / "assets" / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool),
                         out / "assets" / "chain_sum" / "difficulty_partitions.parquet")


def eval_report(counts: dict[str, tuple[int, int]], cell: str = "c",
                replicate: int = 0, training_replicate: int = 0) -> pl.DataFrame:
    """An eval report (one row per sample, the ``eval_report`` schema) of one eval replicate
    (of one training replicate) with, per question id, ``(n, correct)``: the first
    ``correct`` samples right, the rest wrong."""
    from saturated_dag.schemas import schema

    rows = [{"question_id": qid, "cell": cell, "replicate": replicate,
             "training_replicate": training_replicate, "sample_index": i,
             "gold": "3",
             "completion": f"\\boxed{{{3 if i < right else 4}}}",
             "answer": "3" if i < right else "4", "correct": i < right, "num_tokens": 5,
             "finish_reason": "stop", "mean_entropy": 0.5}
            for qid, (n, right) in counts.items() for i in range(n)]
    return pl.DataFrame(rows, schema=schema("eval_report"))
