"""Dagster resources: the experiment profile, the generation backend, Parquet storage."""

from resources.experiment import ExperimentResource
from resources.generation import GenerationResource
from resources.parquet_io import ParquetIOManager

__all__ = ["ExperimentResource", "GenerationResource", "ParquetIOManager"]
