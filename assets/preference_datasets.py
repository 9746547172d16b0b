"""``<task>/<split>/{dpo_pairs,rrhf_groups,raft_set}/<scorer>``, ``<task>/<split>/sft_set`` and
``<task>/hard/correctness_pairs/{random,self_judge}``: the training sets (Sec. 3.3-3.4, App. C.1).

One asset per (split, scorer, kind), so the lineage shows which scorer fed which dataset and a
changed scorer marks exactly its datasets stale. Each is a Parquet file that
``datasets.load_dataset("parquet", data_files=...)`` reads.
"""

from pathlib import Path

import dagster as dg
import pandas as pd

from assets._metadata import markdown_table
from resources import ExperimentResource, ParquetIOManager
from saturated_dag import preference_data as pdata
from saturated_dag.experiments import Experiment

CODE_VERSION = "2"
SCORER_ASSETS = {"self_judge": "self_judge_scores", "strong_judge": "strong_judge_scores",
                 "entropy": "entropy_scores", "random": "random_scores"}
BUILDERS = {"dpo_pairs": pdata.dpo_pairs, "rrhf_groups": pdata.rrhf_groups,
            "raft_set": pdata.raft_set}


def _split_rows(frame: pd.DataFrame, split: str) -> pd.DataFrame:
    return frame[frame["split"] == split]


def _output(table: pd.DataFrame, stats: pdata.BuildStats, split: str) -> dg.Output:
    if table.empty:
        raise dg.Failure(f"no usable questions in split {split!r}: "
                         f"{stats.as_metadata()} (nothing was written)")
    return dg.Output(table, metadata={**stats.as_metadata(),
                                      "preview": markdown_table(table, max_rows=5)})


def _scored_asset(task: str, split: str, kind: str, scorer: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, split, kind, scorer], group_name=f"{task}_{split}",
        io_manager_key="parquet_io", code_version=CODE_VERSION, kinds={"parquet"},
        ins={"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
             "scores": dg.AssetIn(key=[task, SCORER_ASSETS[scorer]])},
        description=f"{kind} of the {split} split, ranked by the {scorer} scorer.",
    )
    def dataset(experiment: ExperimentResource, generation_pool: pd.DataFrame,
                scores: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        rows = _split_rows(scores, split)
        if split == "hard":  # all completions, correct ones ranked first (App. C.1)
            rows = pdata.correct_first(rows)
        else:  # quality among correct completions only (Sec. 3.2)
            rows = rows[rows["correct"].astype(bool)]
        builder = BUILDERS[kind]
        if kind == "rrhf_groups":
            table, stats = builder(generation_pool, rows)
        else:
            table, stats = builder(generation_pool, rows,
                                   seed=experiment.settings.training.seed)
        return _output(table, stats, split)

    return dataset


def _sft_asset(task: str, split: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, split, "sft_set"], group_name=f"{task}_{split}",
        io_manager_key="parquet_io", code_version=CODE_VERSION, kinds={"parquet"},
        ins={"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
             "difficulty_partitions": dg.AssetIn(key=[task, "difficulty_partitions"])},
        description=f"Every correct completion of the {split} split (the SFT baseline).",
    )
    def sft_set(generation_pool: pd.DataFrame,
                difficulty_partitions: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        ids = set(difficulty_partitions.loc[difficulty_partitions["split"] == split,
                                            "question_id"])
        table, stats = pdata.sft_set(generation_pool, ids)
        return _output(table, stats, split)

    return sft_set


def _correctness_asset(task: str, selection: str) -> dg.AssetsDefinition:
    ins = {"generation_pool": dg.AssetIn(key=[task, "generation_pool"]),
           "difficulty_partitions": dg.AssetIn(key=[task, "difficulty_partitions"])}
    if selection == "self_judge":
        ins["scores"] = dg.AssetIn(key=[task, "self_judge_scores"])

    def build(experiment: ExperimentResource, generation_pool: pd.DataFrame,
              difficulty_partitions: pd.DataFrame, scores: pd.DataFrame | None) -> dg.Output:
        ids = set(difficulty_partitions.loc[difficulty_partitions["split"] == "hard",
                                            "question_id"])
        table, stats = pdata.correctness_pairs(generation_pool, ids, scores,
                                               seed=experiment.settings.training.seed)
        return _output(table, stats, "hard")

    spec = {"key": [task, "hard", "correctness_pairs", selection],
            "group_name": f"{task}_hard", "io_manager_key": "parquet_io",
            "code_version": CODE_VERSION, "kinds": {"parquet"}, "ins": ins,
            "description": f"Hard split: correct vs incorrect pairs, chosen by {selection} "
            "(App. C.1); questions with pass@8 = 0 filtered out."}
    if selection == "self_judge":
        @dg.asset(**spec)
        def judged_pairs(experiment: ExperimentResource, generation_pool: pd.DataFrame,
                         difficulty_partitions: pd.DataFrame,
                         scores: pd.DataFrame) -> dg.Output[pd.DataFrame]:
            return build(experiment, generation_pool, difficulty_partitions, scores)

        return judged_pairs

    @dg.asset(**spec)
    def random_pairs(experiment: ExperimentResource, generation_pool: pd.DataFrame,
                     difficulty_partitions: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        return build(experiment, generation_pool, difficulty_partitions, None)

    return random_pairs


def preference_dataset_assets(
    task: str, experiments: list[Experiment]
) -> list[dg.AssetsDefinition]:
    """The datasets the experiment matrix trains on (each built once)."""
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
            built[exp.dataset] = _scored_asset(task, split, kind, rest[0])
    return list(built.values())


def _pairs_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    key = asset.key

    @dg.asset_check(asset=asset, name="chosen_differs_from_rejected", blocking=True,
                    description="Every DPO pair has two different completions.",
                    required_resource_keys={"parquet_io"})
    def check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        store: ParquetIOManager = context.resources.parquet_io
        table = pd.read_parquet(Path(store.base_dir).joinpath(*key.path).with_suffix(".parquet"))
        same = table["chosen"] == table["rejected"]
        same_sample = table["chosen_sample"] == table["rejected_sample"]
        bad = table[same | same_sample]
        return dg.AssetCheckResult(
            passed=bad.empty,
            metadata={"pairs": len(table), "identical_pairs": len(bad),
                      "first_identical": str(bad["question_id"].iloc[0]) if len(bad) else ""},
        )

    return check


def preference_dataset_checks(
    datasets: list[dg.AssetsDefinition],
) -> list[dg.AssetChecksDefinition]:
    """A chosen != rejected check beside every DPO pairs / correctness pairs asset."""
    return [_pairs_check(a) for a in datasets
            if {"dpo_pairs", "correctness_pairs"} & set(a.key.path)]
