"""Cost of one decoding step per generated token at several batch sizes, as the sampler runs
it: the ceiling on what batching can gain on this machine.

One forward pass of one new token per row over a KV cache of ``--context`` positions, timed
for each batch size in turn (alternating, medians). The cache is the sampler's own
(``decoder.GrowingLayer``: a buffer the step appends one column to, read through views);
after each timed step the appended column is forgotten by moving the length back, which
copies nothing. (Before, this benchmark used a ``DynamicCache`` that concatenates the whole
cache at each step and crops it after: a cost the sampler does not have.)

    python -m benchmarks.decode_step --model smollm2-135m-instruct --batches 1 8 64
"""

from __future__ import annotations

from typing import Any

import torch

from benchmarks.common import Report, alternate, base_parser, load_backend, median
from saturated_dag.generation.decoder import growing_cache


@torch.no_grad()
def step_seconds(model: Any, batch: int, context: int) -> Any:
    """A function running one decode step at ``batch`` rows (the cache is built once)."""
    cache = growing_cache(model.config)
    ids = torch.randint(10, 100, (batch, context))
    model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    token = torch.randint(10, 100, (batch, 1))
    positions = torch.full((batch, 1), context)
    mask = torch.ones((batch, context + 1), dtype=torch.long)  # the sampler passes one

    def step() -> None:
        model(input_ids=token, attention_mask=mask, position_ids=positions,
              past_key_values=cache, use_cache=True)
        for layer in cache.layers:  # back to the same length: the column is forgotten
            layer._length -= 1
            layer._view()

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
