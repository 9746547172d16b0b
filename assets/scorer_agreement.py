"""``<task>/scorer_agreement``: within-question Spearman rho between every pair of scorers.

The paper's judge-agreement table (mean, median, % positive rho per split) as Markdown and CSV
metadata, and the rho distributions as a PNG (its Figure 4). On chain sum the rubric joins as a
scorer, so every scorer is also held against it, unless the strong judge is the rubric.

The metadata leads with ``summary`` (the paper's pairs, each mean ρ with its 95% bootstrap
interval over questions; ``findings.agreement_summary``), then the figure, then the table
(every pair, its mean ρ with the same interval).
"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._draws import draw_file, draw_profile
from assets._metadata import (
    frame_output,
    frame_table,
    image,
    markdown_table,
    output_file,
    summary_entry,
)
from assets.quality_scores import scored_completions_for
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.analysis.findings import agreement_rows, agreement_summary
from saturated_dag.infra.atomic import atomic_write_csv
from saturated_dag.reporting.runs_table import INLINE_ROWS
from saturated_dag.scorers import agreement
from saturated_dag.scorers.judges import JUDGES_ARE_COPIES, judges_are_copies


def display(rows: pl.DataFrame) -> dg.TableMetadataValue:
    """``findings.agreement_rows`` as the UI shows it inline: the mean ρ with its interval in
    one cell, ``n/a`` where no question had a defined ρ. Four columns, to fit the metadata
    panel; the median and the % with ρ > 0 are in the CSV and the Markdown entry."""
    mean = [("n/a" if m is None else f"{m:.2f} [{lo:.2f}, {hi:.2f}]") for m, lo, hi in
            rows.select("mean ρ", "mean ρ low", "mean ρ high").iter_rows()]
    shown = rows.select("split", "scorers", "questions").with_columns(
        pl.Series("mean ρ", mean, pl.String))
    return frame_table(shown, max_rows=INLINE_ROWS)


def scorer_agreement_asset(task: str, score_assets: dict[str, str]) -> dg.AssetsDefinition:
    """``score_assets``: scorer name -> its score asset (``scorers.builtin.task_scorers``);
    every one joins the table."""
    ins = {asset: dg.AssetIn(key=[task, asset]) for asset in score_assets.values()}
    ins["generation_pool"] = dg.AssetIn(key=[task, "generation_pool"])
    ins["difficulty_partitions"] = dg.AssetIn(key=[task, "difficulty_partitions"])

    @dg.asset(
        key=[task, "scorer_agreement"], group_name=task, io_manager_key="parquet_io",
        ins=ins, kinds={"polars", "parquet"},
        metadata=schema_metadata("scorer_agreement", report=True),
        description=f"{task}: within-question Spearman rho between scorers (mean, median, "
        "% positive per split), with the rho distributions as a figure.",
    )
    def scorer_agreement(
        context: dg.AssetExecutionContext, experiment: ExperimentResource,
        generation_pool: pl.DataFrame, difficulty_partitions: pl.DataFrame,
        **score_frames: pl.DataFrame,
    ) -> dg.Output[pl.DataFrame]:
        profile = draw_profile(context, experiment)
        scores = {name: score_frames[asset] for name, asset in score_assets.items()}
        rubric_judge = profile.judges.strong.kind == "rubric"
        # the rubric joins as the ground truth on chain sum, unless it already is the strong
        # judge: the same function twice would only add rows with ρ = 1
        if task == "chain_sum" and not rubric_judge:
            completions = scored_completions_for(profile, generation_pool, difficulty_partitions)
            scores["rubric"] = agreement.rubric_scores(completions)
        per_question = agreement.per_question_rho(scores, correct_only=True)
        splits = [*profile.scoring.correct_splits, *profile.scoring.all_completion_splits]
        summary = agreement.summarize(per_question, list(scores), splits)
        title = f"{task}: within-question Spearman rho between scorers (correct completions)"
        out_dir = Path(experiment.output_dir) / task
        out_dir.mkdir(parents=True, exist_ok=True)
        csv_path = draw_file(context, out_dir / "scorer_agreement.csv")
        atomic_write_csv(summary, csv_path)
        png = agreement.rho_figure(per_question,
                                   draw_file(context, out_dir / "scorer_agreement_rho.png"), title)
        context.log.info("\n" + agreement.summary_markdown(summary, title))
        return frame_output(per_question, {
            "summary": summary_entry(agreement_summary(per_question)),
            "rho distributions": image(png, "within-question Spearman rho"),
            "agreement table": display(agreement_rows(per_question, summary)),
            "about the table": dg.MetadataValue.md(
                f"{title}: per split and scorer pair, the mean within-question ρ over the "
                "questions where it is defined, with its 95% bootstrap interval over them, the "
                "median, and the % of them with ρ > 0; the questions skipped are in the "
                "Markdown and CSV tables."),
            "scorers": list(scores),
            "strong judge": "the chain-sum rubric (so no separate rubric rows)" if rubric_judge
                            else f"{profile.judges.strong.model}",
            **({"self-judge vs strong judge": f"**{JUDGES_ARE_COPIES}**."}
               if judges_are_copies(profile.policy.model, profile.judges.strong.kind) else {}),
            "scorer_pairs": summary.select("scorer_a", "scorer_b").unique().height,
            "questions with a defined ρ": int((per_question["status"] == agreement.OK).sum()),
            "agreement table (file)": output_file(csv_path, experiment.output_dir),
            "rho distributions (file)": output_file(png, experiment.output_dir),
            "agreement table (Markdown)": dg.MetadataValue.md(
                agreement.summary_markdown(summary, title)),
            "per-question preview": markdown_table(per_question, max_rows=10),
        })

    return scorer_agreement
