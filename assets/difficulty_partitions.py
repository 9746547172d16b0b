"""``<task>/difficulty_partitions``: saturated, hard and strict_saturated splits (App. A.1)."""

from pathlib import Path

import dagster as dg
import polars as pl

from assets._draws import draw_file
from assets._metadata import frame_output, frame_table, image, markdown_table, output_file
from resources import ExperimentResource
from resources.parquet_io import schema_metadata
from saturated_dag.data import partitions
from saturated_dag.reporting.plots import pass_at_1_heatmap

POOL_TITLES = {"D": "D (target)", "D_prime": "D_prime (strictly easier)"}


def difficulty_partitions_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[task, "difficulty_partitions"],
        group_name=task,
        io_manager_key="parquet_io",
        ins={"generation_pool": dg.AssetIn(key=[task, "generation_pool"])},
        kinds={"polars", "parquet"},
        metadata=schema_metadata("difficulty_partitions"),
        description=f"{task}: per-question p-hat and split (saturated p=1, hard p<=1/4, "
        "strict_saturated from D_prime, the middle excluded).",
    )
    def difficulty_partitions(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        generation_pool: pl.DataFrame,
    ) -> dg.Output[pl.DataFrame]:
        thresholds = experiment.settings.partitions
        table = partitions.partition(
            generation_pool, thresholds.saturated_min_pass, thresholds.hard_max_pass
        )
        counts = partitions.split_counts(table)
        context.log.info(f"{task} splits: {counts}")
        metadata: dict[str, object] = {f"count_{k}": v for k, v in counts.items()}
        metadata["thresholds"] = thresholds.model_dump()
        grids = {pool: partitions.pass_at_1_grid(table, pool) for pool in ("D", "D_prime")}
        grids = {pool: g for pool, g in grids.items() if not g.is_empty()}
        if grids:
            for pool, grid in grids.items():  # Table 6: terms down, digits across, in %
                context.log.info(partitions.grid_markdown(grid, f"pass@1 (%), "
                                                          f"{POOL_TITLES[pool]}"))
                digits = [c for c in grid.columns if c != partitions.GRID_INDEX]
                metadata[f"pass@1 (%), {POOL_TITLES[pool]}"] = frame_table(grid.select(
                    pl.col(partitions.GRID_INDEX).alias("terms / digits"),
                    *(pl.col(d) * 100 for d in digits)), decimals=1)
            png = draw_file(context, Path(experiment.output_dir) / task / "pass_at_1_heatmap.png")
            pass_at_1_heatmap({POOL_TITLES[p]: g for p, g in grids.items()}, png,
                              f"{task}: pass@1 of {experiment.settings.policy.model}")
            metadata["pass@1 heatmap"] = image(png, "pass@1 heatmap")
            metadata["pass@1 heatmap (file)"] = output_file(png, experiment.output_dir)
        metadata["questions"] = markdown_table(
            table.sort("p_hat", descending=True, maintain_order=True), max_rows=15)
        return frame_output(table, metadata)

    return difficulty_partitions


def difficulty_partitions_check(asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="splits_disjoint_and_thresholds_respected", blocking=True,
                    partitions_def=asset.partitions_def)  # one data seed per run
    def check(
        experiment: ExperimentResource, difficulty_partitions: pl.DataFrame
    ) -> dg.AssetCheckResult:
        t = experiment.settings.partitions
        table = difficulty_partitions
        split, p_hat = pl.col("split"), pl.col("p_hat")
        problems = {
            "duplicate_questions": table.height - table["question_id"].n_unique(),
            "saturated_below_threshold": table.filter(
                split.is_in([partitions.SATURATED, partitions.STRICT_SATURATED])
                & (p_hat < t.saturated_min_pass)).height,
            "hard_above_threshold": table.filter(
                (split == partitions.HARD) & (p_hat > t.hard_max_pass)).height,
            "strict_not_from_D_prime": table.filter(
                (split == partitions.STRICT_SATURATED) & (pl.col("pool") != "D_prime")).height,
        }
        return dg.AssetCheckResult(passed=not any(problems.values()), metadata=problems)

    return check
