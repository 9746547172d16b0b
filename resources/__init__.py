"""Dagster resources: the experiment profile, the generation backend, the strong judge,
Parquet storage."""

from resources.experiment import ExperimentResource
from resources.generation import GenerationResource
from resources.judge import JudgeResource
from resources.parquet_io import ParquetIOManager

__all__ = ["ExperimentResource", "GenerationResource", "JudgeResource", "ParquetIOManager"]
