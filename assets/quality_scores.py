"""``<task>/<scorer>_scores``: one asset per registered quality scorer the task scores
(``saturated_dag.scorers.registry``): the paper's four always, and each other scorer the
profile names (on chain sum, the known-answer scorers ``scoring.known_answer_scorers`` lists).

Each scorer is its own asset over the same completions, the scored completions
(``saturated_dag.scorers.scored_completions``), so the lineage graph shows which scores fed
which dataset and one scorer re-runs alone. The judged and teacher-forced scorers work in
resumable shards keyed by the selected completions and the judge (``assets/_stages.py``): a
killed run resumes, an unchanged re-run is a cache hit that loads no model.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl

from assets._draws import draw_file, draw_profile
from assets._metadata import frame_output, markdown_table, output_file
from assets._priority import JUDGE_ENGINE, POLICY_ENGINE, TEACHER_ENGINE, priority
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import schema_metadata
from saturated_dag.config import Profile
from saturated_dag.generation.models import model_fingerprint
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.infra.log import LogFn
from saturated_dag.scorers.entropy_scores import (
    TeacherForcedEntropy,
    entropy_scores,
    missing_entropies,
)
from saturated_dag.scorers.judges import Judge, JudgeRequest, LlmJudge, Verdict
from saturated_dag.scorers.registry import ScorerInputs, ScorerSpec
from saturated_dag.scorers.scored_completions import (
    ScoredCompletions,
    completions_to_score,
    missing_or_nonfinite,
)
from saturated_dag.scorers.tournament import TournamentResult, run_tournament


def _ins(task: str) -> dict[str, dg.AssetIn]:
    return {"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
            "difficulty_partitions": dg.AssetIn(key=[task, "difficulty_partitions"])}


def scored_completions_for(profile: Profile, pool: pl.DataFrame,
                           parts: pl.DataFrame) -> ScoredCompletions:
    s = profile.scoring
    return completions_to_score(pool, parts, s.correct_splits, s.all_completion_splits)


def _common_metadata(completions: ScoredCompletions, scores: pl.DataFrame) -> dict[str, object]:
    meta: dict[str, object] = {
        "scored_completions": scores.height,
        "scored_questions": scores["question_id"].n_unique(),
        "completions_by_split": dict(scores["split"].value_counts(sort=True).iter_rows()),
        "skipped_questions": completions.skipped,
        "mean_score": float(scores["score"].mean() or 0.0),
        "preview": markdown_table(scores, max_rows=10),
    }
    return meta


class _LazyJudge:
    """A judge built on its first call: a fully cached tournament never loads a model."""

    def __init__(self, name: str, build):
        self.name, self._build, self._judge = name, build, None

    def judge(self, requests: list[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        if self._judge is None:
            self._judge = self._build()
        judge: Judge = self._judge
        return judge.judge(requests, log=log)


class _LazyTeacher:
    """The teacher-forced entropy route, loaded on its first call."""

    def __init__(self, build):
        self._build, self._teacher = build, None

    def __call__(self, prompt: str, completion: str, finish_reason: str) -> float:
        if self._teacher is None:
            self._teacher = self._build()
        return self._teacher(prompt, completion, finish_reason)


def _teacher_forced(inference: InferenceResource, log,
                    include_eos: bool = True) -> TeacherForcedEntropy:
    """The policy under transformers (``InferenceResource.policy_teacher``): its own engine,
    or a transformers copy of a vLLM-served policy that takes the device from it."""
    return TeacherForcedEntropy.from_backend(inference.policy_teacher(log),
                                             include_eos=include_eos)


def _score_asset(task: str, name: str, description: str, gpu: bool = True, order: int = 0):
    """The decorator every scorer asset shares: key, inputs, schema, the gpu concurrency
    limit, and its place in the run's order (``assets/_priority.py``)."""
    return dg.asset(
        key=[task, name], group_name=task, io_manager_key="parquet_io", ins=_ins(task),
        pool="gpu" if gpu else None, kinds={"polars", "parquet"}, op_tags=priority(order),
        metadata=schema_metadata(name), description=description)


@dataclass(frozen=True)
class _ModelStep:
    """What a model scorer's step works with: its task, the step's context and resources, the
    run's draw of the profile (``draw_profile``) and the completions it scores."""

    task: str
    context: dg.AssetExecutionContext
    experiment: ExperimentResource
    inference: InferenceResource
    profile: Profile
    completions: ScoredCompletions


def _model_scores_asset(task: str, name: str, description: str,
                        score: Callable[[_ModelStep], dg.Output[pl.DataFrame]], *,
                        order: int, gpu: bool = True,
                        refuse: Callable[[Profile], None] | None = None) -> dg.AssetsDefinition:
    """The asset of a scorer that needs a model (``MODEL_SCORER_ASSETS``): the shared
    decorator, inputs and resources, and the step ``score`` works with. ``refuse``: a check
    of the run's profile that fails the step before any completion is selected."""

    @_score_asset(task, name, description, gpu=gpu, order=order)
    def model_scores(
        context: dg.AssetExecutionContext, experiment: ExperimentResource,
        inference: InferenceResource, generation_pool: pl.DataFrame,
        difficulty_partitions: pl.DataFrame,
    ) -> dg.Output[pl.DataFrame]:
        profile = draw_profile(context, experiment)
        if refuse is not None:
            refuse(profile)
        completions = scored_completions_for(profile, generation_pool, difficulty_partitions)
        return score(_ModelStep(task, context, experiment, inference, profile, completions))

    return model_scores


def _entropy_scores(step: _ModelStep) -> dg.Output[pl.DataFrame]:
    context, profile, completions = step.context, step.profile, step.completions
    include_eos = profile.scoring.entropy_include_eos
    needs_tf = missing_entropies(completions.rows) > 0 or not include_eos
    teacher = (_LazyTeacher(lambda: _teacher_forced(step.inference, context.log, include_eos))
               if needs_tf else None)
    config: dict[str, object] = {"epsilon": profile.scoring.epsilon}
    if not include_eos:
        config["include_eos"] = False  # absent when true: earlier caches stay valid
    if needs_tf:
        config["policy"] = policy_identity(step.inference.policy_settings())
    # "selection": the cache key's name for the scored completions, the name the entropy and
    # tournament shards already on disk are keyed by, so they stay valid
    store, key = open_store(context, step.experiment, config, {"selection": completions.rows})
    with write_errors_reported():
        scores, routes = entropy_scores(completions, profile.scoring.epsilon, teacher,
                                        store=store, shard_size=profile.stages.shard_questions,
                                        include_eos=include_eos)
    meta = _common_metadata(completions, scores)
    meta.update(cache_metadata(context, key, store))
    meta.update({f"route_{k}": v for k, v in routes.items()})
    meta["epsilon"] = profile.scoring.epsilon
    meta["entropy_include_eos"] = include_eos
    return frame_output(scores, meta)


def entropy_scores_asset(task: str) -> dg.AssetsDefinition:
    return _model_scores_asset(
        task, "entropy_scores",
        f"{task}: r = 1/max(mean token entropy, eps) under the policy at T=1 "
        "(from the generation pass, else teacher-forced).", _entropy_scores,
        order=TEACHER_ENGINE)


def _tournament_metadata(result: TournamentResult, completions: ScoredCompletions, path: Path,
                         judge_name: str, output_dir: str) -> dict[str, object]:
    meta = _common_metadata(completions, result.scores)
    meta.update({k: v for k, v in result.summary.items() if v is not None})
    meta["judge"] = judge_name
    meta["comparisons (file)"] = output_file(path, output_dir)
    if result.comparisons.height:
        meta["comparisons preview"] = markdown_table(result.comparisons, max_rows=5)
    return meta


def _save_comparisons(result: TournamentResult, path: Path) -> Path:
    atomic_write_parquet(result.comparisons, path)
    return path


def _tournament(step: _ModelStep, scorer: str, judge, label: str,
                judge_identity: dict[str, object],
                extra: dict[str, object] | None = None) -> dg.Output[pl.DataFrame]:
    """Run the round robin in cached shards, keep every comparison on disk, report counts."""
    context, experiment, completions = step.context, step.experiment, step.completions
    scoring = experiment.settings.scoring
    store, key = open_store(
        context, experiment,
        {"judge": judge_identity, "both_orders": scoring.both_orders,
         "judge_max_new_tokens": scoring.judge_max_new_tokens,
         "judge_batch_size": scoring.judge_batch_size},
        {"selection": completions.rows.select("question_id", "split", "sample_index", "task",
                                            "problem", "completion")})
    with write_errors_reported():
        result = run_tournament(completions, judge, scorer, scoring.both_orders,
                                log=context.log.info, store=store,
                                shard_size=experiment.settings.stages.shard_questions)
        path = _save_comparisons(result, draw_file(
            context, Path(experiment.output_dir) / step.task / f"{scorer}_comparisons.parquet"))
    metadata = {**_tournament_metadata(result, completions, path, label,
                                         experiment.output_dir),
                **cache_metadata(context, key, store), **(extra or {})}
    return frame_output(result.scores, metadata)


def _self_judge_scores(step: _ModelStep) -> dg.Output[pl.DataFrame]:
    profile, inference = step.profile, step.inference
    judge = _LazyJudge("self_judge", lambda: LlmJudge(
        inference.policy_backend(step.context.log), instruct=profile.judges.self_judge.instruct,
        max_new_tokens=profile.scoring.judge_max_new_tokens,
        batch_size=profile.scoring.judge_batch_size, name="self_judge"))
    settings = inference.policy_settings()
    identity = {"policy": policy_identity(settings),
                "instruct": profile.judges.self_judge.instruct}
    return _tournament(step, "self_judge", judge, f"policy {settings.model}", identity,
                       {"instruct_prompt": profile.judges.self_judge.instruct})


def self_judge_scores_asset(task: str) -> dg.AssetsDefinition:
    return _model_scores_asset(
        task, "self_judge_scores",
        f"{task}: win rates of a round-robin tournament judged greedily by the "
        "policy itself (App. D prompts).", _self_judge_scores, order=POLICY_ENGINE)


def _strong_judge_scores(step: _ModelStep) -> dg.Output[pl.DataFrame]:
    profile = step.profile
    settings = profile.judges.strong
    judge = _LazyJudge("strong_judge", lambda: step.inference.strong_judge(
        profile.scoring.judge_max_new_tokens, profile.scoring.judge_batch_size,
        step.context.log))
    name = "rubric" if settings.kind == "rubric" else f"{settings.model} ({settings.backend})"
    identity: dict[str, object] = settings.model_dump(mode="json")
    if settings.kind == "llm":
        identity["fingerprint"] = model_fingerprint(str(settings.model))
    return _tournament(step, "strong_judge", judge, name, identity)


def strong_judge_scores_asset(task: str, model: bool = True) -> dg.AssetsDefinition:
    """``model``: the strong judge is an LLM (under the gpu concurrency limit); the chain-sum
    rubric is a pure function on the CPU and claims no slot of it."""

    def refuse(profile: Profile) -> None:
        if profile.judges.strong.kind == "rubric" and task != "chain_sum":
            raise dg.Failure(f"the rubric strong judge applies to chain_sum only, not {task}: "
                             "set judges.strong.kind: llm for this task")

    return _model_scores_asset(
        task, "strong_judge_scores",
        f"{task}: win rates of a round-robin tournament judged by the strong judge "
        "(an LLM, or the chain-sum rubric).", _strong_judge_scores, gpu=model,
        order=JUDGE_ENGINE, refuse=refuse)


def computed_scores_asset(task: str, spec: ScorerSpec) -> dg.AssetsDefinition:
    """A registered scorer that is a pure function of the selected completions and the pool
    (the random baseline, the known-answer scorers, a project's own: ``docs/extending.md``)."""
    compute = spec.compute
    if compute is None:
        raise ValueError(f"scorer {spec.name!r} needs a model: it has an asset factory of its "
                         "own in MODEL_SCORER_ASSETS, not a compute function")

    @_score_asset(task, spec.asset_name, f"{task}: {spec.description}", gpu=spec.gpu)
    def computed_scores(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource, generation_pool: pl.DataFrame,
        difficulty_partitions: pl.DataFrame,
    ) -> dg.Output[pl.DataFrame]:
        profile = draw_profile(context, experiment)
        completions = scored_completions_for(profile, generation_pool, difficulty_partitions)
        scored = compute(ScorerInputs(completions, generation_pool, profile.scoring.random_seed))
        meta = _common_metadata(completions, scored.scores)
        meta.update({k: dg.MetadataValue.json(dict(v)) if isinstance(v, Mapping) else v
                     for k, v in scored.facts.items()})
        return frame_output(scored.scores, meta)

    return computed_scores


def finite_scores_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="scores_finite_for_every_selected_completion",
                    partitions_def=asset.partitions_def,  # one data seed per run
                    blocking=True, additional_ins=_ins(task),
                    description="Every scored completion (all correct completions of saturated "
                    "and strict_saturated questions, and more) has a finite score.")
    def check(experiment: ExperimentResource, generation_pool: pl.DataFrame,
              difficulty_partitions: pl.DataFrame, scores: pl.DataFrame
              ) -> dg.AssetCheckResult:
        completions = scored_completions_for(experiment.settings, generation_pool,
                                             difficulty_partitions)
        problems = missing_or_nonfinite(scores, completions)
        return dg.AssetCheckResult(
            passed=problems["missing"] == 0 and problems["nonfinite"] == 0, metadata=problems)

    return check


MODEL_SCORER_ASSETS = {"entropy": entropy_scores_asset,
                       "self_judge": self_judge_scores_asset,
                       "strong_judge": strong_judge_scores_asset}
"""The registered scorers that need a model (``ScorerSpec.compute`` is None): their assets."""


def score_assets(task: str, scorers: Sequence[ScorerSpec], judge_is_model: bool
                 ) -> dict[str, dg.AssetsDefinition]:
    """Asset name -> asset of each of ``scorers``, the scorers ``task`` scores
    (``scorers.builtin.task_scorers``); the strong judge's runs an engine when
    ``judge_is_model`` (else the rubric)."""
    return {spec.asset_name: (computed_scores_asset(task, spec) if spec.compute is not None
                              else strong_judge_scores_asset(task, model=judge_is_model)
                              if spec.name == "strong_judge"
                              else MODEL_SCORER_ASSETS[spec.name](task))
            for spec in scorers}
