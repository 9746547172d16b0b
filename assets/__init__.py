"""Dagster assets: one file per box of the pipeline, each a thin layer over saturated_dag."""

from assets.base_model import base_model
from assets.difficulty_partitions import difficulty_partitions_assets, difficulty_partitions_checks
from assets.generation_pool import generation_pool_assets, generation_pool_checks
from assets.quality_scores import quality_score_assets, quality_score_checks
from assets.scorer_agreement import scorer_agreement_assets

ALL_ASSETS = [base_model, *generation_pool_assets, *difficulty_partitions_assets,
              *quality_score_assets, *scorer_agreement_assets]
ALL_ASSET_CHECKS = [*generation_pool_checks, *difficulty_partitions_checks,
                    *quality_score_checks]

__all__ = ["ALL_ASSETS", "ALL_ASSET_CHECKS"]
