"""Training throughput per method: our trainer setup against TRL's defaults, same data.

For each method (DPO, SFT through TRL; σ-RRHF through the project's ``RrhfTrainer``) one
training run of ``--epochs`` on the same data and hyperparameters (learning rate, epochs,
batch sizes, β, max length, LoRA), timed around ``trainer.train()``:

* ours: ``training.train._build_trainer``, the pipeline's own arguments;
* TRL's defaults: ``DPOConfig`` / ``SFTConfig`` (σ-RRHF: transformers' ``TrainingArguments``)
  with only those hyperparameters set, everything else left at the library's default (TRL's
  configs turn gradient checkpointing on, for one).

The data: ``--questions`` chain-sum questions, n completions each sampled from the model;
SFT trains on every completion, DPO on one pair per question (random scores, the highest
against the lowest of a different text), σ-RRHF on each question's n completions. Tokens are
the prompt and completion tokens of every sequence the method feeds forward per epoch
(DPO: chosen and rejected), times epochs.

    python -m benchmarks.bench_methods --model arith-base
"""

from __future__ import annotations

import random
import tempfile
import time
from typing import Any

import polars as pl

from benchmarks.common import Report, base_parser, chain_sum_prompts, load_backend, median
from saturated_dag.config import TrainingSettings
from saturated_dag.generation.base import SamplingParams

METHODS = ("dpo", "sft", "rrhf")


def training_sets(backend: Any, questions: int, n: int, seed: int = 0
                  ) -> dict[str, pl.DataFrame]:
    prompts, _ = chain_sum_prompts(backend, questions)
    samples = backend.sample(prompts, SamplingParams(n=n, temperature=0.6, max_new_tokens=160,
                                                     seed=seed))
    rng = random.Random(seed)
    rows, pairs = [], []
    for q, (prompt, group) in enumerate(zip(prompts, samples, strict=True)):
        scored = sorted(((rng.random(), s.text) for s in group), reverse=True)
        for score, text in scored:
            rows.append({"question_id": f"q{q:03d}", "prompt": prompt, "completion": text,
                         "score": score})
        best = scored[0][1]
        worst = next((t for _, t in reversed(scored) if t != best), None)
        if worst is not None:
            pairs.append({"prompt": prompt, "chosen": best, "rejected": worst})
    completions = pl.DataFrame(rows)
    return {"sft": completions.select("prompt", "completion"), "rrhf": completions,
            "dpo": pl.DataFrame(pairs)}


def tokens_per_epoch(tokenizer: Any, method: str, data: pl.DataFrame) -> int:
    def count(text: str) -> int:
        return len(tokenizer(text)["input_ids"])

    if method == "dpo":
        return sum(2 * count(p) + count(c) + count(r)
                   for p, c, r in data.select("prompt", "chosen", "rejected").iter_rows())
    return sum(count(p) + count(c) for p, c in data.select("prompt", "completion").iter_rows())


def library_default_trainer(method: str, model: Any, tokenizer: Any, data: pl.DataFrame,
                            training: TrainingSettings, workdir: str) -> Any:
    """The pipeline's trainer for ``method`` with the library's default arguments except the
    shared hyperparameters (``_common_args`` swapped for them while it is built)."""
    from unittest import mock

    from saturated_dag.training import train
    from saturated_dag.training.config import grad_accumulation

    def shared(method: str, training: TrainingSettings, output_dir: str, precision: str,
               per_device: int | None = None) -> dict[str, Any]:
        del method, precision
        return {"output_dir": output_dir, "num_train_epochs": training.epochs,
                "per_device_train_batch_size": per_device or training.per_device_batch_size,
                "gradient_accumulation_steps": grad_accumulation(training),
                "learning_rate": training.learning_rate, "report_to": "none",
                "use_cpu": True, "save_strategy": "no", "seed": training.seed,
                "remove_unused_columns": False}

    with mock.patch.object(train, "_common_args", shared):
        return train._build_trainer(method, model, tokenizer, data, training, workdir,
                                    "float32")


def run_once(spec: str, method: str, data: pl.DataFrame, training: TrainingSettings,
             ours: bool) -> float:
    from saturated_dag.generation.models import load_model
    from saturated_dag.training.train import _build_trainer

    model, tokenizer = load_model(spec)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    with tempfile.TemporaryDirectory() as workdir:
        trainer = (_build_trainer(method, model, tokenizer, data, training, workdir, "float32")
                   if ours else library_default_trainer(method, model, tokenizer, data,
                                                        training, workdir))
        start = time.perf_counter()
        trainer.train()
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    args = parser.parse_args(argv)
    if args.toy:
        args.questions, args.n, args.epochs, args.repeats = 2, 2, 1, 1
    backend = load_backend(args.model, args.threads)
    sets = training_sets(backend, args.questions, args.n)
    training = TrainingSettings(epochs=args.epochs, batch_size=args.n,
                                per_device_batch_size=args.n, learning_rate=2e-3,
                                max_length=512, lora_r=32, lora_alpha=64, lora_dropout=0.05)
    rows, summary = [], {}
    for method in args.methods:
        tokens = tokens_per_epoch(backend.tokenizer, method, sets[method]) * args.epochs
        seconds: dict[str, list[float]] = {"ours": [], "defaults": []}
        for _ in range(args.repeats):
            for name in seconds:
                seconds[name].append(run_once(args.model, method, sets[method],
                                              training, ours=name == "ours"))
        rate = {name: tokens / median(values) for name, values in seconds.items()}
        for name in seconds:
            rows.append([method, name, median(seconds[name]), tokens, rate[name]])
        summary[method] = {"ours_over_defaults_tokens_per_s": rate["ours"] / rate["defaults"],
                           "seconds": seconds}
    report = Report("training throughput per method", args.model,
                    {"questions": args.questions, "n": args.n, "epochs": args.epochs,
                     "repeats": args.repeats, "examples": {m: sets[m].height for m in sets}},
                    ["method", "variant", "median s", "tokens", "tokens/s"], rows, summary)
    report.emit(args.out)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
