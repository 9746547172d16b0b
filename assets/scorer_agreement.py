"""``<task>/scorer_agreement``: within-question Spearman rho between every pair of scorers.

The paper's judge-agreement table (mean, median, % positive rho per split) as Markdown and CSV
metadata, and the rho distributions as a PNG (its Figure 4). On chain sum the rubric joins as a
scorer, so every scorer is also held against it.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._metadata import frame_output, image, markdown_table
from assets.quality_scores import SCORERS, selection_for
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.atomic import atomic_write_csv
from saturated_dag.scorers import agreement


def scorer_agreement_asset(task: str) -> dg.AssetsDefinition:
    ins = {name: dg.AssetIn(key=[task, name]) for name in SCORERS}
    ins["generation_pool"] = dg.AssetIn(key=[task, "generation_pool"])
    ins["difficulty_partitions"] = dg.AssetIn(key=[task, "difficulty_partitions"])

    @dg.asset(
        key=[task, "scorer_agreement"], group_name=task, io_manager_key="parquet_io",
        ins=ins, kinds={"polars", "parquet"}, metadata=schema_metadata("scorer_agreement"),
        description=f"{task}: within-question Spearman rho between scorers (mean, median, "
        "% positive per split), with the rho distributions as a figure.",
    )
    def scorer_agreement(
        context: dg.AssetExecutionContext, experiment: ExperimentResource,
        entropy_scores: pl.DataFrame, self_judge_scores: pl.DataFrame,
        strong_judge_scores: pl.DataFrame, random_scores: pl.DataFrame,
        generation_pool: pl.DataFrame, difficulty_partitions: pl.DataFrame,
    ) -> dg.Output[pl.DataFrame]:
        profile = experiment.settings
        scores = {"entropy": entropy_scores, "self_judge": self_judge_scores,
                  "strong_judge": strong_judge_scores, "random": random_scores}
        if task == "chain_sum":
            selection = selection_for(profile, generation_pool, difficulty_partitions)
            scores["rubric"] = agreement.rubric_scores(selection)
        per_question = agreement.per_question_rho(scores, correct_only=True)
        splits = [*profile.scoring.correct_splits, *profile.scoring.all_completion_splits]
        summary = agreement.summarize(per_question, list(scores), splits)
        title = f"{task}: within-question Spearman rho between scorers (correct completions)"
        out_dir = Path(experiment.output_dir) / task
        out_dir.mkdir(parents=True, exist_ok=True)
        csv_path = out_dir / "scorer_agreement.csv"
        atomic_write_csv(summary, csv_path)
        png = agreement.rho_figure(per_question, out_dir / "scorer_agreement_rho.png", title)
        context.log.info("\n" + agreement.summary_markdown(summary, title))
        return frame_output(per_question, {
            "agreement table": dg.MetadataValue.md(agreement.summary_markdown(summary, title)),
            "agreement table (csv)": dg.MetadataValue.text(summary.write_csv()),
            "agreement table (file)": dg.MetadataValue.path(str(csv_path)),
            "rho distributions": image(png, "within-question Spearman rho"),
            "rho distributions (file)": dg.MetadataValue.path(str(png)),
            "scorers": list(scores),
            "scorer_pairs": summary.select("scorer_a", "scorer_b").unique().height,
            "questions_with_defined_rho": int((per_question["status"] == agreement.OK).sum()),
            "per-question preview": markdown_table(per_question, max_rows=10),
        })

    return scorer_agreement
