"""Tiny models for tests: a real Llama architecture with random weights and a real tokenizer.

The tokenizer is trained here with the `tokenizers` library on the project's own prompt
text, so it round-trips prompts and digits like the shipped models do; nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from saturated_dag.tasks.prompts import FORMAT_INSTRUCTION, chain_sum_problem

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]


def _training_text() -> list[str]:
    lines = [chain_sum_problem(f"{a} + {b} - {a}") for a in range(10) for b in range(10)]
    lines += [FORMAT_INSTRUCTION, "Judgment: [0] [1] The answer is \\boxed{-12}."]
    lines += ["Natalia sold clips to 48 of her friends in April. How many?"]
    return lines


def build_tokenizer(chat_template: bool = True) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_training_text(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIALS[3:],
    )
    if chat_template:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(folder: Path, seed: int = 0, chat_template: bool = True) -> Path:
    """Save a random-weight 2-layer Llama plus tokenizer as an ordinary HF folder."""
    tokenizer = build_tokenizer(chat_template)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
