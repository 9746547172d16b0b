"""``<task>/generation_pool``: n sampled completions per training question, verified under
the profile's ``answer_check``.

Sampled in resumable shards keyed by the questions, sampling settings, answer check and the
model's files (``assets/_stages.py``): a killed run resumes, an unchanged re-run is a cache hit.
"""

import dagster as dg
import pandas as pd

from assets._metadata import markdown_table
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from resources import ExperimentResource, GenerationResource
from saturated_dag.pool import generate_pool
from saturated_dag.shards import questions_digest
from saturated_dag.tasks import TASKS, training_questions

CODE_VERSION = "3"  # 2: sampled in shards, each with its own seed; 3: answer_check


def _pool_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, "generation_pool"],
        group_name=task,
        io_manager_key="parquet_io",
        code_version=CODE_VERSION,
        pool="gpu",
        kinds={"pandas", "parquet"},
        deps=["base_model"],
        description=f"{task}: n completions per question of D (and D'), with correctness, "
        "token counts and mean token entropy.",
    )
    def generation_pool(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        policy: GenerationResource,
    ) -> dg.Output[pd.DataFrame]:
        profile = experiment.settings
        settings = policy.settings()  # validate before loading anything
        questions = training_questions(profile, task)
        context.log.info(f"{len(questions)} {task} questions from profile {profile.name!r}")
        stage = f"{task}/generation_pool"
        store, key = open_store(
            experiment, stage, CODE_VERSION,
            {"policy": policy_identity(settings), "sampling": profile.sampling.model_dump(),
             "answer_check": profile.answer_check},
            {"questions": questions_digest(questions)})
        with write_errors_reported():
            pool = generate_pool(
                questions,
                lambda: policy.get_backend(context.log),  # loaded only if a shard is missing
                profile.sampling.params(),
                verify_workers=profile.verify_workers,
                log=context.log.info,
                store=store,
                shard_size=profile.stages.shard_questions,
                answer_check=profile.answer_check,
            )
        by_cell = (
            pool.groupby(["pool", "cell"], dropna=False)["correct"].mean().reset_index()
            .rename(columns={"correct": "pass@1"})
        )
        return dg.Output(
            pool,
            metadata={
                **cache_metadata(context, stage, key, store),
                "profile": profile.name,
                "model": policy.model,
                "questions": len(questions),
                "completions": len(pool),
                "samples_per_question": profile.sampling.n,
                "answer_check": profile.answer_check,
                "pass@1": float(pool["correct"].mean()),
                "truncated_completions": int((pool["finish_reason"] == "length").sum()),
                # no answer found (none stated, or an empty box): incorrect, and counted here
                "completions_without_answer": int(pool["answer"].isna().sum()
                                                  + (pool["answer"] == "").sum()),
                "mean_tokens": float(pool["num_tokens"].mean()),
                "pass@1 by cell": markdown_table(by_cell, max_rows=100),
                "preview": markdown_table(
                    pool[["question_id", "sample_index", "answer", "gold", "correct",
                          "num_tokens", "mean_entropy"]], max_rows=10),
            },
        )

    return generation_pool


def _pool_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="n_completions_per_question", blocking=True)
    def check(
        experiment: ExperimentResource, generation_pool: pd.DataFrame
    ) -> dg.AssetCheckResult:
        n = experiment.settings.sampling.n
        counts = generation_pool.groupby("question_id")["sample_index"].nunique()
        bad = counts[counts != n]
        return dg.AssetCheckResult(
            passed=bad.empty,
            metadata={"questions": len(counts), "questions_without_n_samples": len(bad),
                      "expected_n": n},
        )

    return check


generation_pool_assets = [_pool_asset(task) for task in TASKS]
generation_pool_checks = [
    _pool_check(task, asset) for task, asset in zip(TASKS, generation_pool_assets, strict=True)
]
