"""``<task>/generation_pool``: n sampled completions per training question, verified under
the profile's ``answer_check``.

Sampled in resumable shards keyed by the questions, sampling settings, answer check, the
model's files and this asset's code version (``assets/_stages.py``): a killed run resumes, an
unchanged re-run is a cache hit.
"""

import dagster as dg
import polars as pl

from assets._draws import draw_profile
from assets._metadata import frame_output, frame_table, markdown_table
from assets._priority import POLICY_ENGINE, priority
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import schema_metadata
from saturated_dag.data.pool import generate_pool
from saturated_dag.data.questions import training_questions
from saturated_dag.infra.shards import questions_digest


def generation_pool_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, "generation_pool"],
        group_name=task,
        io_manager_key="parquet_io",
        pool="gpu", op_tags=priority(POLICY_ENGINE),
        kinds={"polars", "parquet"},
        deps=["base_model"],
        metadata=schema_metadata("generation_pool"),
        description=f"{task}: n completions per question of D (and D_prime), with correctness, "
        "token counts and mean token entropy.",
    )
    def generation_pool(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        inference: InferenceResource,
    ) -> dg.Output[pl.DataFrame]:
        profile = draw_profile(context, experiment)  # this draw's questions and sampling seed
        settings = inference.policy_settings()  # validate before loading anything
        questions = training_questions(profile, task)
        context.log.info(f"{len(questions)} {task} questions from profile {profile.name!r}")
        store, key = open_store(
            context, experiment,
            {"policy": policy_identity(settings), "sampling": profile.sampling.model_dump(),
             "answer_check": profile.answer_check},
            {"questions": questions_digest(questions)})
        with write_errors_reported():
            pool = generate_pool(
                questions,
                lambda: inference.policy_backend(context.log),  # loaded only if a shard is missing
                profile.sampling.params(),
                verify_workers=profile.verify_workers,
                log=context.log.info,
                store=store,
                shard_size=profile.stages.shard_questions,
                answer_check=profile.answer_check,
            )
        by_cell = (pool.group_by(["pool", "cell"], maintain_order=True)
                   .agg((100 * pl.col("correct").cast(pl.Float64).mean()).alias("pass@1 (%)"))
                   .sort(["pool", "cell"], nulls_last=True))
        answers = pool["answer"]
        return frame_output(
            pool,
            metadata={
                "profile": profile.name,
                "model": settings.model,
                "questions": len(questions),
                "completions": pool.height,
                "samples_per_question": profile.sampling.n,
                "answer_check": profile.answer_check,
                "pass@1 (%)": round(100 * float(pool["correct"].cast(pl.Float64).mean() or 0.0),
                                    2),
                "truncated_completions": int((pool["finish_reason"] == "length").sum()),
                # no answer found (none stated, or an empty box): incorrect, and counted here
                "completions_without_answer": int(answers.is_null().sum()
                                                  + (answers == "").sum()),
                "mean_tokens": round(float(pool["num_tokens"].mean() or 0.0), 2),
                "pass@1 by cell": frame_table(by_cell, max_rows=200),
                **cache_metadata(context, key, store),  # below the science
                "preview": markdown_table(
                    pool.select("question_id", "sample_index", "answer", "gold", "correct",
                                "num_tokens", "mean_entropy"), max_rows=10),
            },
        )

    return generation_pool


def generation_pool_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="n_completions_per_question", blocking=True,
                    partitions_def=asset.partitions_def)  # one data seed per run
    def check(
        experiment: ExperimentResource, generation_pool: pl.DataFrame
    ) -> dg.AssetCheckResult:
        n = experiment.settings.sampling.n
        counts = generation_pool.group_by("question_id").agg(
            pl.col("sample_index").n_unique().alias("samples"))
        bad = counts.filter(pl.col("samples") != n)
        return dg.AssetCheckResult(
            passed=bad.is_empty(),
            metadata={"questions": counts.height, "questions_without_n_samples": bad.height,
                      "expected_n": n},
        )

    return check
