"""``pretrain_base_model``: the recipe that trains the embedded arithmetic base model.

It writes an ordinary Hugging Face folder; point a profile's ``policy.model`` at it (or
copy it over ``saturated_dag/models/arith_base`` to ship it).
"""

import json

import dagster as dg

from saturated_dag.pretrain import RecipeConfig


class PretrainConfig(dg.Config):
    out_dir: str = "outputs/models/arith_base"
    seed: int = 0
    steps: int | None = None
    threads: int | None = None
    overrides_json: str = "{}"
    """Any other RecipeConfig field, as a JSON object (e.g. {"hidden_size": 96})."""


@dg.op(description="Train the arithmetic base model from scratch on CPU.")
def pretrain(context: dg.OpExecutionContext, config: PretrainConfig) -> dg.Output[str]:
    recipe = RecipeConfig(seed=config.seed)
    try:
        overrides = json.loads(config.overrides_json or "{}")
    except json.JSONDecodeError as err:
        raise dg.Failure(f"overrides_json is not JSON: {err}") from None
    for key, value in overrides.items():
        if not hasattr(recipe, key):
            raise dg.Failure(f"overrides_json: unknown recipe field {key!r}")
        setattr(recipe, key, value)
    if config.steps is not None:
        recipe.steps = config.steps
    if config.threads is not None:
        recipe.threads = config.threads
    from saturated_dag.pretrain import run_recipe  # torch and transformers: only when it runs

    provenance = run_recipe(recipe, config.out_dir, progress=context.log.info)
    return dg.Output(config.out_dir, metadata={
        "out_dir": dg.MetadataValue.path(config.out_dir),
        "steps": provenance["steps"],
        "wall_time_s": provenance["wall_time_s"],
        "parameters": provenance["parameters"],
        "final_loss": provenance["loss_curve"][-1]["loss"] if provenance["loss_curve"] else None,
    })


@dg.job(description="Pretrain the embedded arithmetic base model (see docs/pretraining.md).")
def pretrain_base_model() -> None:
    pretrain()
