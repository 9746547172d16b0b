"""``<task>/<split>/{dpo_pairs,rrhf_groups,raft_set}/<scorer>``, ``<task>/<split>/sft_set`` and
``<task>/hard/correctness_pairs/{random,self_judge,shuffled}``: the training sets (Sec. 3.3-3.4,
App. C.1; ``shuffled`` is the hard split's known-signal control, ``training.hard_pair_control``).

One asset per (split, scorer, kind), so the lineage shows which scorer fed which dataset and a
changed scorer marks exactly its datasets stale. Each is a Parquet file that
``datasets.load_dataset("parquet", data_files=...)`` reads.
"""


import dagster as dg
import polars as pl

from assets._metadata import frame_output, markdown_table
from resources import ExperimentResource, ParquetIOManager
from resources.parquet_io import asset_file, schema_metadata
from saturated_dag.data import preference_data as pdata
from saturated_dag.experiments import HARD_PAIRS_SHUFFLED, Cell
from saturated_dag.infra.atomic import read_proven_parquet


def _split_rows(frame: pl.DataFrame, split: str) -> pl.DataFrame:
    return frame.filter(pl.col("split") == split)


PAIR_RULES = {False: "paper: y_w = argmax, y_l = argmin (random ties)",
              True: "dpo_distinct_texts: y_l = lowest-scored text different from y_w"}


def _output(table: pl.DataFrame, stats: pdata.BuildStats, split: str,
            extra: dict[str, object] | None = None) -> dg.Output:
    if table.is_empty():
        raise dg.Failure(f"no usable questions in split {split!r}: "
                         f"{stats.as_metadata()} (nothing was written)")
    return frame_output(table, {**stats.as_metadata(), **(extra or {}),
                                "preview": markdown_table(table, max_rows=5)})


def _split_ids(partitions: pl.DataFrame, split: str) -> set[str]:
    return set(partitions.filter(pl.col("split") == split)["question_id"].to_list())


def equal_text_pairs(table: pl.DataFrame) -> int:
    """Pairs whose two completions have the same text (zero DPO gradient)."""
    if table.is_empty():
        return 0
    return int((table["chosen"] == table["rejected"]).sum())


def _scored_asset(task: str, split: str, kind: str, scorer: str, scores_asset: str
                  ) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, split, kind, scorer], group_name=f"{task}_{split}",
        io_manager_key="parquet_io", kinds={"dataset", kind, "parquet"},  # the node's badges
        metadata=schema_metadata(kind),
        ins={"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
             "scores": dg.AssetIn(key=[task, scores_asset])},
        description=f"Dataset: {kind} of the {split} split, ranked by the {scorer} scorer.",
    )
    def dataset(experiment: ExperimentResource, generation_pool: pl.DataFrame,
                scores: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        rows = _split_rows(scores, split)
        if split == "hard":  # all completions, correct ones ranked first (App. C.1)
            rows = pdata.correct_first(rows)
        else:  # quality among correct completions only (Sec. 3.2)
            rows = rows.filter(pl.col("correct"))
        training = experiment.settings.training
        extra: dict[str, object] = {}
        if kind == "rrhf_groups":
            table, stats = pdata.rrhf_groups(generation_pool, rows)
        elif kind == "dpo_pairs":
            distinct = training.dpo_distinct_texts
            table, stats = pdata.dpo_pairs(generation_pool, rows, seed=training.seed,
                                           distinct_texts=distinct)
            extra = {"pair_rule": PAIR_RULES[distinct], "dpo_distinct_texts": distinct,
                     "equal_text_pairs": equal_text_pairs(table)}
        else:
            table, stats = pdata.raft_set(generation_pool, rows, seed=training.seed)
        return _output(table, stats, split, extra)

    return dataset


def _sft_asset(task: str, split: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, split, "sft_set"], group_name=f"{task}_{split}",
        io_manager_key="parquet_io", kinds={"dataset", "sft_set", "parquet"},
        metadata=schema_metadata("sft_set"),
        ins={"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
             "difficulty_partitions": dg.AssetIn(key=[task, "difficulty_partitions"])},
        description=f"Dataset: every correct completion of the {split} split (the SFT "
        "baseline).",
    )
    def sft_set(generation_pool: pl.DataFrame,
                difficulty_partitions: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        ids = _split_ids(difficulty_partitions, split)
        table, stats = pdata.sft_set(generation_pool, ids)
        return _output(table, stats, split)

    return sft_set


def _correctness_asset(task: str, selection: str) -> dg.AssetsDefinition:
    ins = {"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
           "difficulty_partitions": dg.AssetIn(key=[task, "difficulty_partitions"])}
    if selection == "self_judge":
        ins["scores"] = dg.AssetIn(key=[task, "self_judge_scores"])

    def build(experiment: ExperimentResource, generation_pool: pl.DataFrame,
              difficulty_partitions: pl.DataFrame, scores: pl.DataFrame | None) -> dg.Output:
        ids = _split_ids(difficulty_partitions, "hard")
        table, stats = pdata.correctness_pairs(
            generation_pool, ids, scores, seed=experiment.settings.training.seed,
            shuffled=selection == HARD_PAIRS_SHUFFLED)
        return _output(table, stats, "hard")

    spec = {"key": [task, "hard", "correctness_pairs", selection],
            "group_name": f"{task}_hard", "io_manager_key": "parquet_io",
            "kinds": {"dataset", "correctness_pairs", "parquet"}, "ins": ins,
            "metadata": schema_metadata("correctness_pairs"),
            "description": "Dataset: correct vs incorrect pairs of the hard split, chosen by "
            f"{selection} (App. C.1); questions with pass@8 = 0 filtered out." + (
                " Shuffled: the random pairs with chosen and rejected swapped on half the "
                "questions, the negative arm of the hard split's known-signal control."
                if selection == HARD_PAIRS_SHUFFLED else "")}
    if selection == "self_judge":
        @dg.asset(**spec)
        def judged_pairs(experiment: ExperimentResource, generation_pool: pl.DataFrame,
                         difficulty_partitions: pl.DataFrame,
                         scores: pl.DataFrame) -> dg.Output[pl.DataFrame]:
            return build(experiment, generation_pool, difficulty_partitions, scores)

        return judged_pairs

    @dg.asset(**spec)
    def random_pairs(experiment: ExperimentResource, generation_pool: pl.DataFrame,
                     difficulty_partitions: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        return build(experiment, generation_pool, difficulty_partitions, None)

    return random_pairs


def preference_dataset_assets(
    task: str, experiments: list[Cell], score_assets: dict[str, str]
) -> list[dg.AssetsDefinition]:
    """The datasets the experiment matrix trains on (each built once); ``score_assets`` maps
    a scorer to its score asset's name (``scorers.builtin.task_scorers``)."""
    built: dict[tuple[str, ...], dg.AssetsDefinition] = {}
    for exp in experiments:
        if exp.dataset in built:
            continue
        split, kind, *rest = exp.dataset
        if kind == "sft_set":
            built[exp.dataset] = _sft_asset(task, split)
        elif kind == "correctness_pairs":
            built[exp.dataset] = _correctness_asset(task, rest[0])
        else:
            built[exp.dataset] = _scored_asset(task, split, kind, rest[0],
                                               score_assets[rest[0]])
    return list(built.values())


def pairs_verdict(table: pl.DataFrame, equal_texts_allowed: bool) -> dg.AssetCheckResult:
    """Two different completions in every pair.

    The same sample on both sides is always an error. Equal texts from two samples are
    legitimate under the paper's DPO rule (they carry zero gradient): the check passes, with
    their count and WARN severity; with ``dpo_distinct_texts`` or for correctness pairs (a
    correct against an incorrect completion) they are an error.
    """
    same_sample = table["chosen_sample"] == table["rejected_sample"]
    same_text = (table["chosen"] == table["rejected"]) & ~same_sample
    bad = table.filter(same_sample | (same_text & (not equal_texts_allowed)))
    equal = int(same_text.sum())
    warn = equal_texts_allowed and equal > 0 and bad.is_empty()
    return dg.AssetCheckResult(
        passed=bad.is_empty(),
        severity=dg.AssetCheckSeverity.WARN if warn else dg.AssetCheckSeverity.ERROR,
        description=(f"{equal} of {len(table)} pairs have the same text on both sides (the "
                     "paper's argmax/argmin rule; zero DPO gradient)") if warn else None,
        metadata={"pairs": table.height, "same_sample_pairs": int(same_sample.sum()),
                  "equal_text_pairs": equal, "equal_texts_allowed": equal_texts_allowed,
                  "identical_pairs": bad.height,
                  "first_identical": str(bad["question_id"][0]) if bad.height else ""},
    )


def _pairs_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    key = asset.key

    @dg.asset_check(asset=asset, name="chosen_differs_from_rejected", blocking=True,
                    partitions_def=asset.partitions_def,  # one data seed per run
                    description="Every pair has two different completions (equal texts are "
                    "counted and allowed in DPO pairs under the paper's rule).",
                    required_resource_keys={"parquet_io", "experiment"})
    def check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        store: ParquetIOManager = context.resources.parquet_io
        experiment: ExperimentResource = context.resources.experiment
        run = context.op_execution_context  # with several data seeds: this run's draw
        partitions = (list(run.partition_keys) if asset.partitions_def is not None
                      else [None])
        # ``key`` is the factory's (before ``Profile.key_prefix``): what the file is named by
        table = pl.concat([read_proven_parquet(asset_file(store.base_dir, key.path, p),
                                               f"re-materialise {key.to_user_string()}")
                           for p in partitions])
        allowed = ("dpo_pairs" in key.path
                   and not experiment.settings.training.dpo_distinct_texts)
        result = pairs_verdict(table, allowed)
        if result.description:
            context.log.warning(f"{'/'.join([*store.location.key_prefix, *key.path])}: "
                                f"{result.description}")
        return result

    return check


def preference_dataset_checks(
    datasets: list[dg.AssetsDefinition],
) -> list[dg.AssetChecksDefinition]:
    """A chosen != rejected check beside every DPO pairs / correctness pairs asset."""
    return [_pairs_check(a) for a in datasets
            if {"dpo_pairs", "correctness_pairs"} & set(a.key.path)]
