"""The sampler's tokens per second per core against the compute floor of this CPU.

The floor is the arithmetic of a generated token over the rate at which this CPU multiplies
matrices of the model's shapes: FLOPs per token from the model's config (every linear layer
and the tied output projection, 2 FLOPs per weight, plus attention's two products over
``--context`` cached positions), and the rate measured by timing, on one thread, exactly the
matrix products one decoding step runs at ``slots`` rows (the model's own weight shapes). The
gap is how far the sampler runs above that floor: what is left is Python, attention's
masking and softmax, sampling, and the cache.

    python -m benchmarks.throughput_floor --slots 64 256
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks.common import Report, base_parser, chain_sum_prompts, load_backend, median
from saturated_dag.generation.base import SamplingParams


def linear_shapes(config: Any) -> list[tuple[int, int]]:
    """``(in, out)`` of every matrix product of one token: per layer q, k, v, o and the MLP's
    three, then the output projection."""
    hidden, inter = config.hidden_size, config.intermediate_size
    head = getattr(config, "head_dim", None) or hidden // config.num_attention_heads
    q, kv = config.num_attention_heads * head, config.num_key_value_heads * head
    layer = [(hidden, q), (hidden, kv), (hidden, kv), (q, hidden),
             (hidden, inter), (hidden, inter), (inter, hidden)]
    return layer * config.num_hidden_layers + [(hidden, config.vocab_size)]


def flops_per_token(config: Any, context: int) -> float:
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    linear = sum(2 * i * o for i, o in linear_shapes(config))
    attention = config.num_hidden_layers * config.num_attention_heads * 2 * 2 * head * context
    return float(linear + attention)


def matmul_seconds(config: Any, rows: int, repeats: int = 200) -> float:
    """Seconds for one decoding step's matrix products at ``rows`` rows (median of runs)."""
    weights = [(torch.randn(rows, i), torch.randn(o, i)) for i, o in linear_shapes(config)]

    def step() -> None:
        for x, w in weights:
            torch.nn.functional.linear(x, w)

    for _ in range(20):
        step()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        step()
        times.append(time.perf_counter() - begin)
    return median(times)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--questions", type=int, default=96)
    parser.add_argument("--context", type=int, default=64,
                        help="cached positions a token attends to, for attention's FLOPs")
    args = parser.parse_args(argv)
    backend = load_backend(args.model, args.threads)
    config = backend.model.config
    per_token = flops_per_token(config, args.context)
    prompts, _ = chain_sum_prompts(backend, args.questions)
    params = SamplingParams(n=8, temperature=0.6, top_p=0.95, max_new_tokens=160, seed=0)
    rows = []
    for slots in args.slots:
        backend.batch_size = slots
        backend.sample(prompts[:4], params)  # warm-up
        runs = []
        for _ in range(args.repeats):
            begin = time.perf_counter()
            out = backend.sample(prompts, params)
            runs.append(time.perf_counter() - begin)
        tokens = sum(s.num_tokens for row in out for s in row)
        measured = tokens / median(runs) / args.threads
        rate = 2 * sum(i * o for i, o in linear_shapes(config)) * slots / matmul_seconds(
            config, slots)
        floor = rate / per_token
        rows.append([slots, round(measured), round(rate / 1e9, 2), round(floor),
                     round(floor / measured, 2)])
    report = Report("sampler against the compute floor", args.model,
                    {"flops_per_token": per_token, "context": args.context,
                     "questions": args.questions, "n": 8, "threads": args.threads},
                    ["slots", "measured tokens/s per core", "matmul GFLOP/s (1 thread)",
                     "floor tokens/s per core", "gap (floor / measured)"], rows, {})
    report.emit(args.out)
    return {"rows": rows}


if __name__ == "__main__":
    main()
