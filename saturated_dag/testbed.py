"""The calibrated testbed: a planted effect must be found, no effect where none is planted,
and the effect must fall as the signal gets noisier (``docs/testbed.md``).

The embedded model's solution styles differ in accuracy on its own pool, so ranking saturated
completions by style (the *oracle*, ``scorers.oracle``) is a signal beyond correctness whose
worth is known. The testbed trains on it and on controls, each on several pool draws (data
seeds) and training seeds, and reports each row's paired Δ pass@1 to the base model with its
95% interval (questions and replicates resampled, ``statistics.paired_delta``):

- **positive control**: σ-RRHF with the oracle; passes when Δ ≥ ``positive_min_effect`` with
  its interval above 0;
- **negative control**: σ-RRHF with the oracle's scores shuffled within each question; passes
  when its interval contains 0 and lies within ±``null_band``;
- **dial**: Δ against the scorer's agreement ρ with the oracle (1, 0.75, 0.5, 0.25, 0), for
  σ-RRHF and DPO; the real scorers (entropy, the rubric strong judge, random) are
  placed on the same axis by their measured ρ.

Each method's recipe (learning rate, DPO's β; every run keeps its best epoch) is selected on
validation pass@1 with the oracle on the first data seed and training seed, then every scorer
of the method trains with it: a row differs from the positive control only in its scores.
Work runs in ``workers`` processes of one torch thread each; every finished pool, run and eval
is kept on disk under its settings' key, so a killed testbed resumes where it stopped.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from saturated_dag.atomic import atomic_write_parquet, atomic_write_text
from saturated_dag.config import Profile, TestbedSettings
from saturated_dag.dpo_search import SearchRun, search_figure, search_table
from saturated_dag.dpo_search import verdict as search_verdict
from saturated_dag.findings import Control
from saturated_dag.methods import METHODS
from saturated_dag.parallel import cpu_cores
from saturated_dag.schemas import schema
from saturated_dag.scorers import oracle as known
from saturated_dag.scorers.scored_completions import (
    ScoredCompletions,
    completions_to_score,
    score_frame,
)
from saturated_dag.selection import choose
from saturated_dag.statistics import Interval, paired_delta, per_question_pass_rate

LogFn = Callable[[str], None]
METHOD_LABELS = {m.name: m.label for m in METHODS.values()}


# ---------------------------------------------------------------- work items (in workers)


def _init_worker(owner: int | None = None) -> None:
    """One torch thread per worker: two workers on two cores never oversubscribe. A worker of
    a pool is bound to ``owner``, the process that started it, with the lifeline every worker
    of a run has (``lifeline.bind_worker``): it dies with the run, zombie or not."""
    if owner is not None:
        from saturated_dag.lifeline import bind_worker

        bind_worker(owner)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


def _questions(spec: dict[str, Any]) -> list:
    from saturated_dag.tasks.chain_sum import build_pool

    cells = [tuple(c) for c in spec["cells"]]
    exclude = set(spec.get("exclude", []))
    return build_pool(spec["pool"], cells, spec["per_cell"], spec["seed"], exclude)


def _sample(spec: dict[str, Any]) -> str:
    """Sample a question set with the base model (a pool, or the base model's eval)."""
    from saturated_dag.generation.transformers_backend import TransformersBackend
    from saturated_dag.pool import generate_pool

    backend = TransformersBackend.load(spec["model"], batch_size=spec["batch_size"])
    frame = generate_pool(_questions(spec["questions"]), backend, _params(spec),
                          answer_check=spec["answer_check"])
    atomic_write_parquet(frame, Path(spec["out"]))
    return spec["out"]


def _params(spec: dict[str, Any]) -> Any:
    from saturated_dag.generation.base import SamplingParams

    return SamplingParams(**spec["sampling"])


def _train(spec: dict[str, Any]) -> str:
    """Train one run (best epoch by validation pass@1; its per-question validation results
    kept for the selection rule), then, when asked, sample the eval set with it. A run
    already trained is only evaluated."""
    from saturated_dag.evaluation import adapter_backend, evaluate, evaluate_samples, summarise
    from saturated_dag.generation.transformers_backend import TransformersBackend
    from saturated_dag.training.config import SETTINGS_OF_METHOD, LoraSettings
    from saturated_dag.training.train import train_adapter

    folder = Path(spec["folder"])
    params = _params(spec)
    if not (folder / "run.json").exists():
        validation = _questions(spec["validation"])
        tables: list[pl.DataFrame] = []

        def validation_pass_at_1(model: Any, tokenizer: Any) -> float:
            backend = TransformersBackend(model, tokenizer, batch_size=spec["batch_size"])
            table, _ = evaluate(validation, backend, params, answer_check=spec["answer_check"])
            tables.append(table)
            return summarise(table, ks=(1,))["pass@1"] / 100

        settings = dict(spec["settings"])
        settings["lora"] = LoraSettings(**settings["lora"])
        result = train_adapter(spec["method"], spec["model"], pl.read_parquet(spec["data"]),
                               SETTINGS_OF_METHOD[spec["method"]](**settings),
                               folder / "adapter", eval_fn=validation_pass_at_1)
        atomic_write_parquet(tables[result.best_epoch - 1], folder / "validation.parquet")
        logged = [{k: v for k, v in h.items() if k in _LOGGED} for h in result.log_history
                  if "loss" in h]
        atomic_write_text(folder / "run.json", json.dumps(
            {"best_epoch": result.best_epoch, "epochs": result.epochs, "log": logged}))
    if spec.get("evaluate") and not (folder / "eval.parquet").exists():
        backend = adapter_backend(spec["model"], str(folder / "adapter"), spec["batch_size"])
        samples = evaluate_samples(_questions(spec["eval"]), backend, params,
                                   answer_check=spec["answer_check"])
        atomic_write_parquet(samples.select(*_SAMPLE_COLUMNS), folder / "eval.parquet")
    return str(folder)


_SAMPLE_COLUMNS = ("question_id", "cell", "sample_index", "completion", "correct")
_LOGGED = ("step", "epoch", "loss", "rewards/margins", "rewards/accuracies", "logps/chosen",
           "logps/rejected", "rank_loss", "sft_loss")
"""The training log a run keeps (``run.json``): DPO's margins and log-probabilities over
training are what the DPO recipe search reads (``dpo_search``)."""


def _dispatch(job: tuple[str, dict[str, Any]]) -> str:
    kind, spec = job
    return {"sample": _sample, "train": _train}[kind](spec)


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Recipe:
    """One method's trainable settings: what the selection chooses."""

    method: str
    learning_rate: float
    beta: float | None = None
    nll_weight: float | None = None
    """DPO + NLL on the chosen completion (``training.dpo_nll_weight``); None: the profile's."""
    epochs: int | None = None
    """None: ``testbed.epochs`` (the DPO search trains longer)."""

    @property
    def label(self) -> str:
        beta = "" if self.beta is None else f", β={self.beta:g}"
        nll = "" if not self.nll_weight else f", NLL {self.nll_weight:g}"
        epochs = "" if self.epochs is None else f", ≤{self.epochs} epochs"
        return f"η={self.learning_rate:.0e}{beta}{nll}{epochs}"


@dataclass(frozen=True)
class Run:
    recipe: Recipe
    scorer: str  # "sft" for SFT
    data_seed: int
    training_seed: int

    @property
    def name(self) -> str:
        r = self.recipe
        beta = "" if r.beta is None else f"_beta{r.beta:g}"
        nll = "" if r.nll_weight is None else f"_nll{r.nll_weight:g}"
        epochs = "" if r.epochs is None else f"_ep{r.epochs}"
        return (f"{r.method}_{self.scorer}_lr{r.learning_rate:g}{beta}{nll}{epochs}"
                f"_d{self.data_seed}_t{self.training_seed}")


def _key(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()
                          ).hexdigest()[:12]


class Testbed:
    """Paths, question sets and work items of one profile's testbed."""

    def __init__(self, profile: Profile, out_dir: str | Path, log: LogFn | None = None,
                 code_version: str | None = None):
        """``code_version``: the code's version (the Dagster asset's, derived from the modules
        it imports); part of every cache key, so a code change never reuses a stale run."""
        if profile.testbed is None:
            raise ValueError(f"profile {profile.name!r} has no testbed section")
        self.profile, self.settings = profile, profile.testbed
        self.say = log or (lambda _m: None)
        self.cells = [list(c) for c in self.settings.grid.cells()]
        self.sampling = {"n": profile.sampling.n, "temperature": profile.sampling.temperature,
                         "top_p": profile.sampling.top_p,
                         "max_new_tokens": profile.sampling.max_new_tokens,
                         "seed": profile.sampling.seed}
        self.common = {"model": str(profile.policy.model), "answer_check": profile.answer_check,
                       "sampling": self.sampling, "batch_size": profile.policy.batch_size}
        self.root = Path(out_dir) / "testbed" / _key({**self.common, "code": code_version})

    # question sets -------------------------------------------------------------------
    def eval_spec(self) -> dict[str, Any]:
        s = self.settings
        return {"pool": "eval", "cells": self.cells, "per_cell": s.eval_questions_per_cell,
                "seed": s.eval_seed}

    @functools.cached_property
    def _eval_expressions(self) -> list[str]:
        from saturated_dag.tasks.chain_sum import expressions

        return sorted(expressions(_questions(self.eval_spec())))

    def pool_spec(self, data_seed: int) -> dict[str, Any]:
        return {"pool": "D", "cells": self.cells, "per_cell": self.settings.questions_per_cell,
                "seed": data_seed, "exclude": self._eval_expressions}

    @functools.cache  # noqa: B019 (one Testbed per run: the cache dies with it)
    def validation_spec(self, data_seed: int) -> dict[str, Any]:
        from saturated_dag.tasks.chain_sum import expressions

        used = set(self._eval_expressions) | expressions(_questions(self.pool_spec(data_seed)))
        return {"pool": "validation", "cells": self.cells,
                "per_cell": self.settings.validation_questions_per_cell, "seed": data_seed,
                "exclude": sorted(used)}

    def pool_path(self, data_seed: int) -> Path:
        return self.root / "pools" / f"d{data_seed}_{_key(self.pool_spec(data_seed))}.parquet"

    def base_eval_path(self) -> Path:
        return self.root / "base_eval" / f"{_key(self.eval_spec())}.parquet"

    # training sets ------------------------------------------------------------------
    def dataset(self, method: str, scorer: str, data_seed: int, pool: pl.DataFrame,
                scores: dict[str, pl.DataFrame]) -> Path:
        from saturated_dag import preference_data as pdata

        distinct = self.profile.training.dpo_distinct_texts
        folder = self.root / "datasets" / f"d{data_seed}_{_key(self.pool_spec(data_seed))}"
        path = folder / f"{method}_{scorer}{'_distinct' if method == 'dpo' and distinct else ''}" \
            ".parquet"
        if path.exists():
            return path
        if method == "sft":
            saturated = set(saturated_ids(pool))
            table, _ = pdata.sft_set(pool, saturated)
        elif method == "raft":  # SFT's controls: the scorer's best correct completion
            table, _ = pdata.raft_set(pool, scores[scorer], seed=data_seed)
        elif method == "rrhf":
            table, _ = pdata.rrhf_groups(pool, scores[scorer])
        else:
            table, _ = pdata.dpo_pairs(pool, scores[scorer], seed=data_seed,
                                       distinct_texts=distinct)
        atomic_write_parquet(table, path)
        return path

    def run_folder(self, run: Run) -> Path:
        """Keyed by everything a run's result depends on: its settings, its training pool, its
        validation and eval sets and, for DPO, the pair rule."""
        key = {"settings": self.train_settings(run), "pool": self.pool_spec(run.data_seed),
               "validation": self.validation_spec(run.data_seed), "eval": self.eval_spec(),
               "dpo_distinct_texts": self.profile.training.dpo_distinct_texts}
        return self.root / "runs" / f"{run.name}_{_key(key)}"

    def train_settings(self, run: Run) -> dict[str, Any]:
        """The run's trainer settings, built by the graph's own route
        (``training.config.settings_for`` on the profile's ``training`` section with the
        run's recipe, epochs and seed laid over it, validated): every setting the graph's
        adapters train with (gradient checkpointing, the σ-RRHF switches, ...) reaches the
        testbed's runs too, so the controls vouch for the code that prints the tables."""
        from saturated_dag.config import TrainingSettings, merge_settings
        from saturated_dag.training.config import settings_for

        recipe = run.recipe
        update: dict[str, Any] = {"epochs": recipe.epochs or self.settings.epochs,
                                  "learning_rate": recipe.learning_rate,
                                  "seed": run.training_seed}
        if recipe.method == "dpo":
            update["dpo_beta"] = recipe.beta
            if recipe.nll_weight is not None:
                update["dpo_nll_weight"] = recipe.nll_weight
        training = TrainingSettings.model_validate(merge_settings(
            self.profile.training.model_dump(mode="json"), update))
        return asdict(settings_for(run.recipe.method, training))

    def train_job(self, run: Run, data: Path, evaluate: bool) -> tuple[str, dict[str, Any]]:
        return ("train", {**self.common, "method": run.recipe.method, "data": str(data),
                          "settings": self.train_settings(run),
                          "folder": str(self.run_folder(run)), "evaluate": evaluate,
                          "validation": self.validation_spec(run.data_seed),
                          "eval": self.eval_spec()})


def saturated_ids(pool: pl.DataFrame) -> list[str]:
    per_question = pool.group_by("question_id").agg(pl.col("correct").cast(pl.Float64).mean())
    return sorted(per_question.filter(pl.col("correct") == 1.0)["question_id"].to_list())


def scores_for(pool: pl.DataFrame, data_seed: int, names: Iterable[str],
               epsilon: float = 1e-8) -> tuple[dict[str, pl.DataFrame], dict[str, dict]]:
    """Every testbed scorer over the saturated questions' correct completions of one pool:
    the known-answer family (calibrated on these completions), random, entropy (from
    the generation pass) and the rubric strong judge's round-robin win rates
    (``run_tournament``, as the graph's strong-judge asset scores them)."""
    from saturated_dag.scorers.judges import RubricJudge
    from saturated_dag.scorers.random_scores import random_scores
    from saturated_dag.scorers.tournament import run_tournament

    sat = set(saturated_ids(pool))
    parts = (pool.group_by("question_id")
             .agg(n_correct=pl.col("correct").cast(pl.Int64).sum())
             .with_columns(split=pl.when(pl.col("question_id").is_in(sorted(sat)))
                           .then(pl.lit("saturated")).otherwise(pl.lit("other"))))
    selection: ScoredCompletions = completions_to_score(pool, parts, ["saturated"])
    names = list(names)
    accuracy = known.style_accuracy(pool)
    if set(accuracy) <= {"other"}:
        raise ValueError("testbed: no completion of the pool has a known solution style; the "
                         "oracle needs the embedded arithmetic model (policy.model arith-base)")
    family = [n for n in names if n in known.ORACLE_SCORERS]
    out, facts = {}, {}
    for name, (table, fact) in known.known_answer_scores(selection, accuracy, data_seed,
                                                         ["oracle", *family]).items():
        out[name], facts[name] = table, fact
    rows = selection.rows
    groups = known._groups(rows)
    if "random" in names:
        out["random"] = random_scores(selection, data_seed)
    if "entropy" in names:
        entropy = rows["mean_entropy"].to_numpy().astype(float)
        if not np.isfinite(entropy).all():
            raise ValueError("testbed: the pool lacks mean token entropies (a transformers "
                             "pool records them in its generation pass)")
        out["entropy"] = score_frame(rows, "entropy", 1.0 / np.maximum(entropy, epsilon))
    if "strong_judge" in names:  # the embedded strong judge: the rubric's round robin
        out["strong_judge"] = run_tournament(selection, RubricJudge(), "strong_judge").scores
    oracle_values = out["oracle"]["score"].to_numpy()
    for name, table in out.items():
        facts.setdefault(name, {})["rho_with_oracle"] = known.mean_rho(
            oracle_values, table["score"].to_numpy(), groups)
    facts["_style_accuracy"] = accuracy
    facts["_training_questions"] = {"saturated": len(sat), "scored": rows["question_id"]
                                    .n_unique()}
    return {n: out[n] for n in ["oracle", *names] if n in out}, facts


# ---------------------------------------------------------------- running it


def _execute(jobs: list[tuple[str, dict[str, Any]]], workers: int, say: LogFn,
             what: str) -> list[str]:
    """Run ``jobs`` in ``workers`` one-thread processes (in this process when 1)."""
    if not jobs:
        return []
    say(f"{what}: {len(jobs)} item(s) on {workers} worker(s)")
    if workers == 1:
        _init_worker()
        return [_dispatch(job) for job in jobs]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context,
                             initializer=_init_worker, initargs=(os.getpid(),)) as pool:
        futures = [pool.submit(_dispatch, job) for job in jobs]
        done = []
        for i, future in enumerate(futures, 1):
            done.append(future.result())
            say(f"{what}: {i}/{len(jobs)} done ({Path(done[-1]).name})")
        return done


@dataclass
class TestbedResult:
    rows: pl.DataFrame          # one per (method, scorer): Δ pass@1 with its interval
    selection: pl.DataFrame     # each method's recipe grid with validation pass@1
    cells: pl.DataFrame         # per eval cell: base pass@1, best style, headroom, Δ
    styles: pl.DataFrame        # per row, cell and style: share and accuracy
    verdicts: dict[str, Any]
    facts: dict[str, Any]
    dpo_search: pl.DataFrame | None = None  # one row per recipe (``dpo_search.SCHEMA``)
    search_logs: list[list[dict[str, float]]] | None = None  # each recipe's oracle run's log


def choose_recipe(recipes: list[Recipe], validation: list[pl.DataFrame], rule: str
                  ) -> tuple[int, list[tuple[float, float]]]:
    """The recipe the profile's rule picks (``testbed.selection_rule``), by the project's one
    selection code (``selection.choose``); per recipe, (points behind the best, its paired
    standard error)."""
    return choose(validation, [r.learning_rate for r in recipes], rule)


def _validation(folder: Path) -> tuple[float, int]:
    record = json.loads((folder / "run.json").read_text())
    best = int(record["best_epoch"])
    score = next(e.get("val_pass@1", float("nan")) for e in record["epochs"]
                 if int(e["epoch"]) == best)
    return 100 * float(score), best


def run_testbed(profile: Profile, out_dir: str | Path, log: LogFn | None = None,
                code_version: str | None = None) -> TestbedResult:
    """Pools, scores, the recipe selection, every replicate run, and the analysis."""
    bed = Testbed(profile, out_dir, log, code_version)
    s, say = bed.settings, bed.say
    workers = s.workers or cpu_cores()
    samples = []
    for seed in s.data_seeds:
        if not bed.pool_path(seed).exists():
            samples.append(("sample", {**bed.common, "questions": bed.pool_spec(seed),
                                       "out": str(bed.pool_path(seed))}))
    if not bed.base_eval_path().exists():
        samples.append(("sample", {**bed.common, "questions": bed.eval_spec(),
                                   "out": str(bed.base_eval_path())}))
    _execute(samples, workers, say, "base-model sampling (pools, eval set)")
    pools = {d: pl.read_parquet(bed.pool_path(d)) for d in s.data_seeds}
    scores, facts = {}, {}
    names = list(dict.fromkeys([*s.scorers, *s.dpo_scorers, *(SFT_CONTROLS if s.sft else []),
                                *([known.SHUFFLED] if s.dpo_search else [])]))
    for d, pool in pools.items():
        scores[d], facts[d] = scores_for(pool, d, names, profile.scoring.epsilon)
        found = facts[d]["_training_questions"]["saturated"]
        say(f"data seed {d}: {found} saturated training questions; agreement with the oracle: "
            + ", ".join(f"{n} {facts[d][n]['rho_with_oracle']:+.2f}" for n in scores[d]))
        if found < s.min_training_questions:
            raise ValueError(
                f"testbed: data seed {d} has {found} saturated questions, fewer than "
                f"testbed.min_training_questions ({s.min_training_questions}); raise "
                "testbed.questions_per_cell")

    methods = [*s.methods, *(["sft"] if s.sft else [])]
    first_d, first_t = s.data_seeds[0], s.training_seeds[0]
    grid = {m: [Recipe(m, lr, beta) for lr in s.learning_rates
                for beta in (s.dpo_betas if m == "dpo" else [None])] for m in methods}

    def scorer_of(method: str, scorer: str) -> str:
        return "sft" if method == "sft" else scorer

    def data(method: str, scorer: str, d: int) -> Path:
        return bed.dataset(method, scorer, d, pools[d], scores[d])

    # 1. the recipe: each method's grid with the oracle, first data and training seed
    select_runs = [Run(r, scorer_of(m, "oracle"), first_d, first_t)
                   for m, recipes in grid.items() for r in recipes]
    _execute([bed.train_job(run, data(run.recipe.method, run.scorer, first_d), False)
              for run in select_runs if not (bed.run_folder(run) / "run.json").exists()],
             workers, say, "recipe selection (validation pass@1, oracle scores)")
    chosen: dict[str, Recipe] = {}
    selection_rows = []
    for m, recipes in grid.items():
        folders = [bed.run_folder(Run(r, scorer_of(m, "oracle"), first_d, first_t))
                   for r in recipes]
        tables = [pl.read_parquet(f / "validation.parquet") for f in folders]
        pick, margins = choose_recipe(recipes, tables, s.selection_rule)
        chosen[m] = recipes[pick]
        for i, (recipe, folder) in enumerate(zip(recipes, folders, strict=True)):
            score, epoch = _validation(folder)
            selection_rows.append({"method": METHOD_LABELS[m],
                                   "learning rate": recipe.learning_rate, "β": recipe.beta,
                                   "validation pass@1": score, "best epoch": epoch,
                                   "behind the best": margins[i][0],
                                   "one standard error": margins[i][1], "chosen": i == pick})
        say(f"{METHOD_LABELS[m]}: chose {chosen[m].label} on validation pass@1 "
            f"({s.selection_rule} rule)")
    selection = pl.DataFrame(selection_rows)

    # 2. every row's replicates with its method's recipe; SFT's controls (RAFT on the
    # oracle's best and on a random correct completion) train with SFT's recipe
    rows_of = {(m, scorer_of(m, sc)) for m in methods
               for sc in (s.dpo_scorers if m == "dpo" else s.scorers)}
    if s.sft:
        chosen["raft"] = Recipe("raft", chosen["sft"].learning_rate)
        rows_of |= {("raft", scorer) for scorer in SFT_CONTROLS}
    runs = {key: [Run(chosen[key[0]], key[1], d, t) for d in s.data_seeds
                  for t in s.training_seeds] for key in sorted(rows_of)}
    todo = [bed.train_job(run, data(run.recipe.method, run.scorer, run.data_seed), True)
            for batch in runs.values() for run in batch
            if not (bed.run_folder(run) / "eval.parquet").exists()]
    _execute(todo, workers, say, "replicate runs (train, then sample the eval set)")
    evals = {key: [pl.read_parquet(bed.run_folder(r) / "eval.parquet") for r in batch]
             for key, batch in runs.items()}
    search = _search_runs(bed, data, workers, say) if s.dpo_search is not None else None
    base = pl.read_parquet(bed.base_eval_path())
    agreement = {name: float(np.mean([facts[d][name]["rho_with_oracle"]
                                      for d in s.data_seeds])) for name in scores[first_d]}
    return analyse(s, base, evals, chosen, agreement, selection,
                   {"agreement with the oracle": agreement,
                    "style accuracy on the pool": {d: facts[d]["_style_accuracy"]
                                                   for d in s.data_seeds},
                    "saturated training questions": {
                        d: facts[d]["_training_questions"]["saturated"] for d in s.data_seeds},
                    "dial calibration": {d: {n: f for n, f in facts[d].items()
                                             if n in known.DIAL} for d in s.data_seeds},
                    "folder": str(bed.root)}, search)


def _search_runs(bed: Testbed, data: Callable[[str, str, int], Path], workers: int,
                 say: LogFn) -> list[SearchRun]:
    """DPO's recipe search (``TestbedSettings.dpo_search``): every (NLL weight, β, η) with the
    oracle's pairs on the first data and training seed, trained (best epoch on validation)
    and then evaluated, by the testbed's own runs. The shuffled control trains only where the
    oracle's point estimate reaches ``dpo_min_effect`` on the cells that can show a style
    effect: a recipe whose oracle falls short fails DPO's controls whatever its shuffled run
    does, so its run would buy nothing (the table says "not run")."""
    s = bed.settings
    search = s.dpo_search
    assert search is not None
    first_d, first_t = s.data_seeds[0], s.training_seeds[0]
    recipes = [Recipe("dpo", lr, beta, weight, search.epochs) for weight in search.nll_weights
               for beta in search.betas for lr in search.learning_rates]

    def run_all(runs: list[Run], what: str) -> None:
        _execute([bed.train_job(run, data("dpo", run.scorer, first_d), True) for run in runs
                  if not (bed.run_folder(run) / "eval.parquet").exists()], workers, say, what)

    oracles = [Run(r, "oracle", first_d, first_t) for r in recipes]
    run_all(oracles, f"DPO recipe search, oracle ({len(recipes)} recipes: train, then sample "
            "the eval set)")
    base = pl.read_parquet(bed.base_eval_path())
    usable = cell_table(base, s.positive_min_effect).filter(
        pl.col("shows_style_effect"))["cell"].to_list()
    base_rate = 100 * base.filter(pl.col("cell").is_in(usable))["correct"].cast(
        pl.Float64).mean()
    evals = {o: pl.read_parquet(bed.run_folder(o) / "eval.parquet") for o in oracles}
    promising = [o for o in oracles if 100 * evals[o].filter(pl.col("cell").is_in(usable))[
        "correct"].cast(pl.Float64).mean() - base_rate >= s.dpo_min_effect]
    shuffled = {o: Run(o.recipe, known.SHUFFLED, first_d, first_t) for o in promising}
    run_all(list(shuffled.values()), f"DPO recipe search, shuffled control of the "
            f"{len(shuffled)} recipe(s) whose oracle gained ≥ {s.dpo_min_effect:g} points")
    out = []
    for oracle in oracles:
        folder, recipe = bed.run_folder(oracle), oracle.recipe
        record = json.loads((folder / "run.json").read_text())
        control = shuffled.get(oracle)
        out.append(SearchRun(
            float(recipe.beta or 0), recipe.learning_rate, float(recipe.nll_weight or 0),
            evals[oracle], None if control is None else pl.read_parquet(
                bed.run_folder(control) / "eval.parquet"),
            pl.read_parquet(folder / "validation.parquet"), int(record["best_epoch"]),
            record.get("log", [])))
    return out


# ---------------------------------------------------------------- the analysis


def _per_question(samples: pl.DataFrame, questions: list[str]) -> np.ndarray:
    return per_question_pass_rate(samples, questions, "testbed: an eval sample set")


SFT_CONTROLS = {"oracle": "SFT positive control (the oracle's best completion)",
                "random": "SFT reference (a random correct completion)"}
"""SFT's two controls, trained as RAFT (SFT on a scorer's best completion per question): the
oracle's best, and a random correct completion. Their contrast separates "the ranking
taught SFT something" from "any selection of correct completions helps"."""


def role_of(method: str, scorer: str) -> str:
    """The row's part in the testbed; every method's controls are named alike, and the
    ``method`` column says whose they are."""
    if method == "sft":
        return "SFT (not a null)"
    if method == "raft":
        return SFT_CONTROLS.get(scorer, "RAFT")
    if scorer == "oracle":
        return "positive control"
    if scorer == known.SHUFFLED:
        return "negative control"
    if scorer in known.DIAL:
        return "dial"
    return "real scorer" if scorer != "random" else "random scorer"


def cell_table(base: pl.DataFrame, min_spread: float) -> pl.DataFrame:
    """Per eval cell, from the base model's own eval samples: its pass@1, each style's
    accuracy, the spread between the most and least accurate style (styles with at least 5%
    of the cell's samples) and whether the cell can show a style effect (spread ≥
    ``min_spread`` points)."""
    styled = known.styled(base)
    total = styled.group_by("cell").agg(cell_samples=pl.len())
    per_style = (styled.group_by("cell", "style")
                 .agg(samples=pl.len(), accuracy=100 * pl.col("correct").cast(pl.Float64).mean())
                 .join(total, on="cell")
                 .filter(pl.col("samples") >= 0.05 * pl.col("cell_samples")))
    spread = per_style.group_by("cell").agg(
        best_style=pl.col("style").sort_by("accuracy").last(),
        best_accuracy=pl.col("accuracy").max(),
        worst_style=pl.col("style").sort_by("accuracy").first(),
        worst_accuracy=pl.col("accuracy").min())
    base_p = styled.group_by("cell").agg(
        base_pass_at_1=100 * pl.col("correct").cast(pl.Float64).mean())
    return (base_p.join(spread, on="cell").with_columns(
        style_spread=pl.col("best_accuracy") - pl.col("worst_accuracy"),
        headroom=pl.col("best_accuracy") - pl.col("base_pass_at_1"))
        .with_columns(shows_style_effect=pl.col("style_spread") >= min_spread).sort("cell"))


def _spearman(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(y)) < 2:
        return None
    return float(spearmanr(x, y).statistic)


Z_POWER = 0.8416  # the 80%-power quantile (statistics.detectable_effect)
ROW_SCHEMA = schema("testbed_validation")


def analyse(s: TestbedSettings, base: pl.DataFrame,
            evals: dict[tuple[str, str], list[pl.DataFrame]], chosen: dict[str, Recipe],
            agreement: dict[str, float], selection: pl.DataFrame,
            facts: dict[str, Any], search: list[SearchRun] | None = None) -> TestbedResult:
    """Each row's paired Δ pass@1 on the cells that can show a style effect, the controls'
    verdicts and the dose-response, from the samples on disk."""
    cells = cell_table(base, s.positive_min_effect)
    usable = cells.filter(pl.col("shows_style_effect"))["cell"].to_list()
    if not usable:
        raise ValueError("testbed: no eval cell has styles that differ by "
                         f"{s.positive_min_effect} points; nothing could show an effect")
    base_in = base.filter(pl.col("cell").is_in(usable))
    questions = sorted(base_in["question_id"].unique().to_list())
    base_m = _per_question(base_in, questions)[None, :]
    rows, intervals = [], {}
    for (method, scorer), frames in evals.items():
        matrix = np.stack([_per_question(f.filter(pl.col("cell").is_in(usable)), questions)
                           for f in frames])
        delta = paired_delta(matrix, base_m).scaled(100)
        intervals[(method, scorer)] = delta
        half = (delta.high - delta.low) / 2
        rows.append({
            "method": METHOD_LABELS[method], "scorer": scorer, "role": role_of(method, scorer),
            "recipe": chosen[method].label,
            "target ρ": known.DIAL.get(scorer) if method in ("rrhf", "dpo") else None,
            "ρ with oracle": agreement.get(scorer) if method != "sft" else None,
            "replicates": delta.replicates, "questions": delta.questions,
            "pass@1": 100 * float(matrix.mean()), "Δ pass@1": delta.estimate,
            "Δ low": delta.low, "Δ high": delta.high, "p": delta.p,
            "detectable effect": half * (1.959964 + Z_POWER) / 1.959964})
    table = pl.DataFrame(rows, schema=ROW_SCHEMA).sort("method", "role", "scorer")
    contrast = None
    if ("raft", "oracle") in evals and ("raft", "random") in evals:
        best, anyone = (np.stack([_per_question(f.filter(pl.col("cell").is_in(usable)),
                                                questions) for f in evals[("raft", sc)]])
                        for sc in ("oracle", "random"))
        contrast = paired_delta(best, anyone).scaled(100)
    verdicts = _verdicts(s, intervals, evals, agreement, contrast)
    search_rows = None
    if search:
        search_rows = search_table(search, base, usable, s.dpo_min_effect, s.null_band,
                                   s.selection_rule)
        verdicts["DPO recipe search"] = search_verdict(search_rows)
    per_cell = _cell_deltas(base, evals.get(("rrhf", "oracle"), []), cells)
    samples = {f"{METHOD_LABELS[m]} · {sc}": pl.concat(frames) for (m, sc), frames in
               evals.items()}
    from saturated_dag.behaviour import style_table
    from saturated_dag.pretrain.styles import detect_style

    styles = style_table(base, samples, detect_style)
    facts = {**facts, "cells used": usable, "base pass@1 (cells used)": 100 * base_m.mean()}
    return TestbedResult(table, selection, per_cell, styles, verdicts, facts, search_rows,
                         [list(r.log) for r in search or []])


def _cell_deltas(base: pl.DataFrame, frames: list[pl.DataFrame], cells: pl.DataFrame
                 ) -> pl.DataFrame:
    """The positive control's Δ pass@1 per cell, beside the cell's style facts."""
    out = []
    for cell in cells["cell"].to_list():
        qs = sorted(base.filter(pl.col("cell") == cell)["question_id"].unique().to_list())
        b = _per_question(base.filter(pl.col("cell") == cell), qs)[None, :]
        if not frames:
            continue
        m = np.stack([_per_question(f.filter(pl.col("cell") == cell), qs) for f in frames])
        d = paired_delta(m, b).scaled(100)
        out.append({"cell": cell, "positive control Δ pass@1": d.estimate,
                    "Δ low": d.low, "Δ high": d.high})
    frame = pl.DataFrame(out) if out else pl.DataFrame({"cell": cells["cell"]})
    return cells.join(frame, on="cell", how="left")


POSITIVE, NEGATIVE = "positive control", "negative control"


def _effect_verdict(delta: Interval, minimum: float, what: str) -> dict[str, Any]:
    return {"Δ": delta.estimate, "low": delta.low, "high": delta.high,
            "passed": delta.estimate >= minimum and delta.low > 0,
            "rule": f"{what}: Δ ≥ {minimum:g} points and the 95% interval above 0"}


def _verdicts(s: TestbedSettings, intervals: dict[tuple[str, str], Interval],
              evals: dict[tuple[str, str], list[pl.DataFrame]],
              agreement: dict[str, float],
              sft_contrast: Interval | None = None) -> dict[str, Any]:
    """Each method's controls, read off that method's own rows only (a control of σ-RRHF
    says nothing about DPO): ``positive control (<method>)``, ``negative control
    (<method>)`` and ``dose-response (<method>)`` for σ-RRHF and DPO; for SFT, the oracle's
    best completion against a random correct one (``sft_contrast``)."""
    out: dict[str, Any] = {}
    minimum = {"rrhf": s.positive_min_effect, "dpo": s.dpo_min_effect}
    for method in ("rrhf", "dpo"):
        name = METHOD_LABELS[method]
        positive = intervals.get((method, "oracle"))
        if positive is not None:
            out[f"{POSITIVE} ({name})"] = _effect_verdict(
                positive, minimum[method], f"{name} with the oracle against the base model")
        negative = intervals.get((method, known.SHUFFLED))
        if negative is not None:
            out[f"{NEGATIVE} ({name})"] = {
                "Δ": negative.estimate, "low": negative.low, "high": negative.high,
                "passed": (negative.low <= 0 <= negative.high
                           and negative.low >= -s.null_band and negative.high <= s.null_band),
                "rule": f"{name} with shuffled oracle scores: the 95% interval contains 0 and "
                        f"lies within ±{s.null_band:g} points"}
        points = [(known.DIAL[sc], intervals[(method, sc)].estimate)
                  for sc in known.DIAL if (method, sc) in intervals]
        if len(points) >= 3:
            rho = _spearman([p[0] for p in points], [p[1] for p in points])
            out[f"dose-response ({name})"] = {
                "points": len(points), "spearman": rho,
                "passed": rho is not None and rho >= 0.8,
                "rule": "Spearman of Δ against the dial's ρ at least 0.8"}
    if sft_contrast is not None:
        out[f"{POSITIVE} (SFT)"] = _effect_verdict(
            sft_contrast, s.sft_min_effect,
            "SFT on the oracle's best completion against SFT on a random correct one")
    found = controls(out)
    passed = [label for label, c in found.items() if c.passed]
    out["smallest detectable effect"] = {
        "passed by method": {m: c.passed for m, c in found.items()},
        "reading": (f"a null of {', '.join(dict.fromkeys(METHOD_LABELS[m] for m in passed))} "
                    "elsewhere in this run reads 'no effect larger than its detectable "
                    "effect'; a null of any other method is unreadable" if passed else
                    "no method's positive control passed: no null of this run can be read")}
    return out


CONTROLLED = {"rrhf": "rrhf", "dpo": "dpo", "sft": "sft", "raft": "sft"}
"""Method -> the method whose positive control licenses its nulls (RAFT is SFT on one
completion per question: SFT's control is trained as RAFT, so it covers both)."""


def controls(verdicts: dict[str, Any]) -> dict[str, Control]:
    """Each method's positive control from the testbed's verdicts (``findings.null_reading``
    reads a method's null only beside its own passing control)."""
    out: dict[str, Control] = {}
    for method, owner in CONTROLLED.items():
        name = METHOD_LABELS[owner]
        verdict = verdicts.get(f"{POSITIVE} ({name})")
        if verdict is not None:
            what = "the oracle's best against a random correct" if owner == "sft" else "oracle"
            out[method] = Control(method, f"{name} positive control ({what})",
                                  bool(verdict["passed"]))
    return out


def headline(result: TestbedResult) -> str:
    """One paragraph: what the testbed found, with its numbers."""
    v = result.verdicts
    parts = []
    for name in (n for n in v if n.startswith((POSITIVE, NEGATIVE))):
        r = v[name]
        parts.append(f"{name}: Δ pass@1 {r['Δ']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}] "
                     f"({'passed' if r['passed'] else 'FAILED'}: {r['rule']})")
    for name, r in v.items():
        if name.startswith("dose-response"):
            rho = "n/a" if r["spearman"] is None else f"{r['spearman']:+.2f}"
            parts.append(f"{name}: Spearman {rho} over {r['points']} dial points "
                         f"({'passed' if r['passed'] else 'not passed'})")
    search = v.get("DPO recipe search")
    if search is not None:
        parts.append(f"DPO recipe search over {search['recipes']} recipes: {search['reading']}")
    return "; ".join(parts) + "."


def write_outputs(result: TestbedResult, folder: Path) -> dict[str, Path]:
    """The tables as Parquet and CSV, the verdicts as JSON, the dose-response figure."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in ("rows", "selection", "cells", "styles"):
        frame = getattr(result, name)
        paths[name] = atomic_write_parquet(frame, folder / f"testbed_{name}.parquet")
    paths["verdicts"] = atomic_write_text(folder / "testbed_verdicts.json", json.dumps(
        {"verdicts": result.verdicts, "facts": result.facts}, indent=1, default=str))
    paths["figure"] = dose_response_figure(result.rows, folder / "testbed_dose_response.png")
    if result.dpo_search is not None:
        paths["dpo search"] = atomic_write_parquet(result.dpo_search,
                                                   folder / "testbed_dpo_search.parquet")
        paths["dpo search figure"] = search_figure(
            result.dpo_search, result.search_logs or [], folder / "testbed_dpo_search.png")
    return paths


def dose_response_figure(rows: pl.DataFrame, path: Path) -> Path:
    """Δ pass@1 (95% interval) against each scorer's measured agreement with the oracle: the
    dial as lines per method, the controls and real scorers as labelled points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from saturated_dag.atomic import atomic_save_figure

    fig, ax = plt.subplots(figsize=(8, 5), dpi=150)
    ax.axhline(0, color="grey", lw=0.8)
    colours = {"σ-RRHF": "tab:blue", "DPO": "tab:orange", "SFT": "tab:green"}
    for method, colour in colours.items():
        part = rows.filter((pl.col("method") == method) & pl.col("ρ with oracle").is_not_null())
        if part.is_empty():
            continue
        dial = part.filter(pl.col("target ρ").is_not_null()).sort("ρ with oracle")
        x, y = dial["ρ with oracle"].to_numpy(), dial["Δ pass@1"].to_numpy()
        err = [y - dial["Δ low"].to_numpy(), dial["Δ high"].to_numpy() - y]
        ax.errorbar(x, y, yerr=err, fmt="-o", color=colour, capsize=3,
                    label=f"{method}: the dial")
        other = part.filter(pl.col("target ρ").is_null())
        for row in other.iter_rows(named=True):
            yv = row["Δ pass@1"]
            ax.errorbar([row["ρ with oracle"]], [yv],
                        yerr=[[yv - row["Δ low"]], [row["Δ high"] - yv]], fmt="s",
                        color=colour, capsize=3, mfc="white")
            ax.annotate(row["scorer"], (row["ρ with oracle"], yv), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("within-question Spearman ρ with the oracle (measured)")
    ax.set_ylabel("Δ pass@1 to the base model (points, 95% interval)")
    ax.set_title("Testbed: how reliable must a signal beyond correctness be to help?")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)
    return path
