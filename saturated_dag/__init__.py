"""saturated-dag core, one folder per stage of the paper's pipeline.

The plan at the root (``config``: the profile; ``experiments``: its cells; ``methods``;
``schemas``), then the stages in order: ``tasks`` (questions and answer checks), ``generation``
(sampling backends), ``data`` (the generation pool, its partitions, the training sets),
``scorers``, ``training``, ``evaluation``, ``analysis`` (findings, testbed) and ``reporting``
(tables, figures, cards, tracking); ``infra`` holds what every stage stands on, and
``pretrain`` the embedded model's recipe.

This package has no Dagster import; the Dagster layer (assets/, resources/, jobs/,
definitions.py at the repository root) wraps it.
"""

__version__ = "0.1.0"
