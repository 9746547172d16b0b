"""Tiny random-weight models of the paper's exact architectures, for the ``rehearsal`` profile.

The paper samples ``Qwen/Qwen3-1.7B-Base`` (``Qwen3ForCausalLM``) and judges with
``Qwen/Qwen3-30B-A3B`` (``Qwen3MoeForCausalLM``). Neither is on this machine, and what a
rehearsal of the GPU path needs is their *code paths*: the same model classes in transformers,
PEFT and vLLM (attention with q/k norms, grouped KV heads, the MoE router, tied or untied
embeddings as the real checkpoints have them), the same LoRA targets, and a Qwen-style
tokenizer: no BOS, ``<|im_end|>`` as EOS, ``<|endoftext|>`` as padding, both stop tokens in the
generation config, and a ChatML template that honours ``enable_thinking`` the way Qwen3's does
(``False`` writes an empty ``<think>`` block after the assistant header).

The weights are random (seeded), so the models write noise; the tokenizer is a byte-level BPE
trained here on the project's own prompts, so every text encodes and prompts stay short.
Nothing is downloaded. The folders are built once into the model cache
(``cache.cache_dir()``), atomically, and are identical for a given ``BUILD``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

BUILD = 1
"""Bump when the builders change: the cache folder names carry it, so a new build is made."""

POLICY, JUDGE = "rehearsal-qwen3", "rehearsal-qwen3-moe"
"""The short names a profile uses (``policy.model``, ``judges.strong.model``)."""

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
THINK, END_THINK = "<think>", "</think>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
ADDED_TOKENS = [THINK, END_THINK]
MAX_POSITIONS = 8192

# Qwen3's template in miniature: ChatML turns, and with ``enable_thinking=False`` an empty
# think block after the generation prompt (what Qwen3's own template writes).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\n\n</think>\n\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

# Shapes: Qwen3's proportions cut down to the smallest vLLM's CPU attention accepts (head
# size 32; 16 is refused: "Unsupported CPU attention configuration").
DENSE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32}
MOE = {**DENSE, "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
       "num_experts_per_tok": 2, "decoder_sparse_step": 1, "norm_topk_prob": True}


def _corpus() -> list[str]:
    """Text the BPE merges are learnt from: the prompts and judge templates the pipeline sends
    (so they encode into few tokens) and some arithmetic; any other text still encodes bytewise."""
    from saturated_dag.scorers import judge_prompts
    from saturated_dag.tasks.prompts import FORMAT_INSTRUCTION, chain_sum_problem, policy_prompt

    lines = [policy_prompt(chain_sum_problem(f"{a} + {b} - {c}"))
             for a in range(0, 100, 7) for b in range(0, 100, 11) for c in range(0, 100, 13)]
    lines += [FORMAT_INSTRUCTION, "The answer is \\boxed{-12}.", "Judgment: [0]", "Judgment: [1]"]
    lines += [value for name, value in vars(judge_prompts).items()
              if name.isupper() and isinstance(value, str)]
    lines += ["Natalia sold clips to 48 of her friends in April, and then she sold half as "
              "many clips in May. How many clips did Natalia sell altogether in April and May?"]
    return lines


def build_tokenizer(vocab_size: int = 1024) -> Any:
    """A Qwen-style byte-level BPE tokenizer (see the module doc), trained deterministically."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=ENDOFTEXT,
                                   additional_special_tokens=[IM_START, IM_END],
                                   model_max_length=MAX_POSITIONS)
    fast.add_tokens(ADDED_TOKENS)  # Qwen3: <think>/</think> are added, not special, tokens
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(kind: str, tokenizer: Any) -> Any:
    from transformers import Qwen3Config, Qwen3MoeConfig

    common = {"vocab_size": len(tokenizer), "max_position_embeddings": MAX_POSITIONS,
              "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6,
              "bos_token_id": None, "eos_token_id": tokenizer.convert_tokens_to_ids(IM_END),
              "pad_token_id": tokenizer.convert_tokens_to_ids(ENDOFTEXT)}
    if kind == POLICY:  # Qwen3-1.7B ties its input and output embeddings
        config = Qwen3Config(**DENSE, **common, tie_word_embeddings=True)
        config.architectures = ["Qwen3ForCausalLM"]
    else:  # Qwen3-30B-A3B does not
        config = Qwen3MoeConfig(**MOE, **common, tie_word_embeddings=False)
        config.architectures = ["Qwen3MoeForCausalLM"]
    return config


def _write(kind: str, folder: Path, seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    tokenizer = build_tokenizer()
    config = _config(kind, tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    stops = [tokenizer.convert_tokens_to_ids(t) for t in (IM_END, ENDOFTEXT)]
    GenerationConfig(eos_token_id=stops, pad_token_id=stops[1], bos_token_id=None,
                     ).save_pretrained(folder)
    (folder / "REHEARSAL.json").write_text(json.dumps(
        {"model": kind, "build": BUILD, "seed": seed,
         "note": "random weights: a rehearsal of the GPU path's code, not a language model"}))


def rehearsal_model_dir(kind: str, seed: int = 0) -> Path:
    """The folder of the rehearsal model ``kind`` (``POLICY`` or ``JUDGE``), built on first use."""
    from saturated_dag.generation.cache import cache_dir
    from saturated_dag.infra.atomic import (
        OWNER_FILE,
        give_umask_modes,
        make_scratch,
        remove_dead_scratch,
    )

    if kind not in (POLICY, JUDGE):
        raise ValueError(f"unknown rehearsal model {kind!r}: {POLICY!r} or {JUDGE!r}")
    target = cache_dir() / "models" / f"{kind}-build{BUILD}-seed{seed}"
    if (target / "config.json").is_file():
        return target
    remove_dead_scratch(target)
    staging = make_scratch(target)
    try:
        _write(kind, staging, seed)
        (staging / OWNER_FILE).unlink()
        give_umask_modes(staging)
        try:
            os.replace(staging, target)
        except OSError:  # another process built it first: keep theirs
            if not (target / "config.json").is_file():
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
