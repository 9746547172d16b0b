"""The Llama-architecture causal LM the recipe trains: an ordinary HF model any loader accepts."""

from __future__ import annotations

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from saturated_dag.pretrain.config import RecipeConfig


def build_model(cfg: RecipeConfig, tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A freshly initialised Llama with tied embeddings, seeded by the recipe seed."""
    torch.manual_seed(cfg.seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["LlamaForCausalLM"],
    )
    return LlamaForCausalLM(config)


def generation_config(tokenizer: PreTrainedTokenizerFast) -> GenerationConfig:
    """The paper's sampling defaults (T=0.6, top-p 0.95) and this tokenizer's EOS/pad."""
    return GenerationConfig(
        do_sample=True,
        temperature=0.6,
        top_p=0.95,
        max_new_tokens=256,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
