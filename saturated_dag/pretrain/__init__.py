"""Pretraining recipe of the embedded arithmetic base model; no Dagster here.

``RecipeConfig`` and ``run_recipe`` load lazily: the trainer imports torch, which a reader of
the recipe's settings (``judges_are_copies``, the corpus) does not need.
"""

from typing import Any

__all__ = ["RecipeConfig", "run_recipe"]


def __getattr__(name: str) -> Any:
    if name == "RecipeConfig":
        from saturated_dag.pretrain.config import RecipeConfig

        return RecipeConfig
    if name == "run_recipe":
        from saturated_dag.pretrain.train import run_recipe

        return run_recipe
    raise AttributeError(f"module 'saturated_dag.pretrain' has no attribute {name!r}")
