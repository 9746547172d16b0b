"""CLI: ``python -m saturated_dag.pretrain --out DIR [--minutes M] [--seed S] [--steps N]``."""

from __future__ import annotations

import argparse

from saturated_dag.pretrain.config import RecipeConfig
from saturated_dag.pretrain.train import run_recipe


def main(argv: list[str] | None = None) -> None:
    """Run the recipe with the default config, overriding seed / steps / wall-clock cap."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="output folder (an HF model folder)")
    parser.add_argument("--minutes", type=float, default=None, help="wall-clock cap (stops early)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="override the step count")
    args = parser.parse_args(argv)
    cfg = RecipeConfig(seed=args.seed, minutes=args.minutes)
    if args.steps is not None:
        cfg.steps = args.steps
    run_recipe(cfg, args.out, progress=lambda msg: print(msg, flush=True))


if __name__ == "__main__":
    main()
