"""Cost of one decoding step per generated token at several batch sizes: the ceiling on
what batching can gain on this machine (it bounds ours-over-plain in ``bench_sampling``).

One forward pass of one new token per row over a KV cache of ``--context`` positions, timed
for each batch size in turn (alternating, medians).

    python -m benchmarks.decode_step --model smollm2-135m-instruct --batches 1 8 64
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from benchmarks.common import Report, alternate, base_parser, load_backend, median


@torch.no_grad()
def step_seconds(model: Any, batch: int, context: int) -> Any:
    """A function running one decode step at ``batch`` rows (the cache is built once)."""
    cache = DynamicCache(config=model.config)
    ids = torch.randint(10, 100, (batch, context))
    model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    token = torch.randint(10, 100, (batch, 1))
    positions = torch.full((batch, 1), context)

    def step() -> None:
        model(input_ids=token, position_ids=positions, past_key_values=cache, use_cache=True)
        cache.crop(-1)  # back to the same cache length for the next timing

    return step


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--context", type=int, default=128)
    args = parser.parse_args(argv)
    if args.toy:
        args.batches, args.context, args.repeats = [1, 4], 8, 1
    model = load_backend(args.model, args.threads).model
    variants = {str(b): step_seconds(model, b, args.context) for b in args.batches}
    seconds, _ = alternate(variants, max(args.repeats, 5))
    rows = [[b, median(seconds[str(b)]) * 1e3, median(seconds[str(b)]) / b * 1e3,
             b / median(seconds[str(b)])] for b in args.batches]
    report = Report("decode step", args.model, {"context": args.context},
                    ["batch", "ms per step", "ms per token", "tokens/s ceiling"], rows,
                    {"seconds": seconds})
    report.emit(args.out)
    return {"rows": rows}


if __name__ == "__main__":
    main()
