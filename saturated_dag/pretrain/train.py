"""CPU training loop and the recipe entry point ``run_recipe``."""

from __future__ import annotations

import hashlib
import json
import math
import platform
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from transformers import PreTrainedTokenizerFast

from saturated_dag.pretrain.config import RecipeConfig
from saturated_dag.pretrain.corpus import Example, judge_example, policy_example
from saturated_dag.pretrain.model import build_model, generation_config
from saturated_dag.pretrain.tokenizer import save_tokenizer, train_tokenizer
from saturated_dag.tasks.prompts import render_prompt

Progress = Callable[[str], None]


def render_example_prompt(tokenizer: PreTrainedTokenizerFast, ex: Example) -> str:
    """The prompt exactly as sampling renders it (policy prompts via ``render_prompt``)."""
    if ex.kind == "policy":
        return render_prompt(tokenizer, ex.messages[0]["content"], "auto")
    return tokenizer.apply_chat_template(ex.messages, tokenize=False, add_generation_prompt=True)


def encode(tokenizer: PreTrainedTokenizerFast, ex: Example, prompt_loss: bool) -> tuple[list, list]:
    """Token ids of prompt + completion + EOS and their labels (-100 where no loss).

    Prompt and completion are tokenized separately, so the boundary tokens match what the
    model sees when it continues a rendered prompt at sampling time.
    """
    p = tokenizer(render_example_prompt(tokenizer, ex), add_special_tokens=False).input_ids
    c = [*tokenizer(ex.completion, add_special_tokens=False).input_ids, tokenizer.eos_token_id]
    labels = (p if prompt_loss else [-100] * len(p)) + c
    return p + c, labels


def collate(rows: list[tuple[list, list]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch tensors."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (x, y) in enumerate(rows):
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, : len(y)] = torch.tensor(y)
        mask[i, : len(x)] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def bucketed_batches(
    tokenizer: PreTrainedTokenizerFast, rng: random.Random, cfg: RecipeConfig, kind: str
) -> list[dict[str, torch.Tensor]]:
    """``cfg.bucket_batches`` batches of one kind, grouped by length to cut padding (CPU time)."""
    make = judge_example if kind == "judge" else policy_example
    size = cfg.judge_batch_size if kind == "judge" else cfg.batch_size
    rows = [
        encode(tokenizer, make(rng, cfg), cfg.prompt_loss) for _ in range(size * cfg.bucket_batches)
    ]
    rows.sort(key=lambda r: len(r[0]))
    batches = [
        collate(rows[i : i + size], tokenizer.pad_token_id) for i in range(0, len(rows), size)
    ]
    rng.shuffle(batches)
    return batches


def lr_at(step: int, cfg: RecipeConfig) -> float:
    """Linear warmup, then cosine decay to ``min_lr_ratio * lr``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (
        cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
    )


def recipe_sources() -> list[Path]:
    """The files whose text decides what the recipe trains (and nothing else in the package)."""
    pkg = Path(__file__).resolve().parents[1]
    own = sorted((pkg / "pretrain").glob("*.py"))
    return [
        *own,
        pkg / "scorers" / "rubric.py",
        pkg / "scorers" / "judge_prompts.py",
        pkg / "tasks" / "prompts.py",
    ]


def recipe_fingerprint() -> dict[str, str | None]:
    """The git commit (when there is one) and a hash of the recipe's own source files."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in recipe_sources():
        digest.update(path.name.encode() + path.read_bytes())
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=here,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or None
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", *map(str, recipe_sources())],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, status = None, ""
    # The commit alone does not pin the recipe when its files differ from that commit.
    return {
        "git_commit": commit,
        "recipe_differs_from_commit": bool(status) if commit else None,
        "recipe_sha256": digest.hexdigest(),
    }


def run_recipe(config: RecipeConfig, out_dir: str | Path, progress: Progress | None = None) -> dict:
    """Train the base model from scratch and save an HF folder; returns the provenance dict."""
    log = progress or (lambda _msg: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    t0 = time.monotonic()
    fingerprint = recipe_fingerprint()  # the sources as they were when this run started
    tokenizer = train_tokenizer(config)
    model = build_model(config, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"tokenizer {len(tokenizer)} tokens; model {n_params:,} parameters")
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
        betas=(0.9, 0.98),
    )
    rng = random.Random(config.seed)
    model.train()
    curve: list[dict] = []
    window: list[float] = []
    step, stopped_early = 0, False
    queues: dict[str, list[dict[str, torch.Tensor]]] = {"policy": [], "judge": []}
    for step in range(config.steps):
        if config.minutes is not None and time.monotonic() - t0 > 60 * config.minutes:
            stopped_early = True
            break
        kind = "judge" if rng.random() < config.judge_fraction else "policy"
        if not queues[kind]:
            queues[kind] = bucketed_batches(tokenizer, rng, config, kind)
        batch = queues[kind].pop()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, config)
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        window.append(loss.item())
        if (step + 1) % config.log_every == 0 or step + 1 == config.steps:
            elapsed = time.monotonic() - t0
            point = {
                "step": step + 1,
                "loss": round(sum(window) / len(window), 5),
                "seconds": round(elapsed, 1),
            }
            curve.append(point)
            window = []
            log(f"step {point['step']}/{config.steps} loss {point['loss']:.4f} {elapsed / 60:.1f}m")
    steps_done = step if stopped_early else config.steps
    model.eval()
    model.save_pretrained(out)
    save_tokenizer(tokenizer, out)
    generation_config(tokenizer).save_pretrained(out)
    provenance = {
        "recipe": "saturated_dag.pretrain",
        "config": config.to_dict(),
        "seed": config.seed,
        "steps": steps_done,
        "stopped_early": stopped_early,
        "wall_time_s": round(time.monotonic() - t0, 1),
        "parameters": n_params,
        "vocab_size": len(tokenizer),
        "loss_curve": curve,
        **fingerprint,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": config.threads,
        "machine": platform.machine(),
    }
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=1) + "\n")
    log(f"saved {out} after {steps_done} steps in {provenance['wall_time_s']} s")
    return provenance
