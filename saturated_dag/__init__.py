"""saturated-dag core: tasks, verification, generation backends, scorers, losses, metrics.

This package has no Dagster import; the Dagster layer (assets/, resources/, jobs/,
definitions.py at the repository root) wraps it.
"""

__version__ = "0.1.0"
