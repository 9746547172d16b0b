"""Tokenizer trained with the `tokenizers` library on the generated corpus.

Why this shape: digits are always single tokens (arithmetic stays learnable digit by digit),
while BPE merges run across spaces inside non-digit text, so the fixed instruction text, the
judge system prompt and the style phrases collapse into a few tokens each. Short sequences are
what makes CPU pretraining fast.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from saturated_dag.pretrain.config import RecipeConfig
from saturated_dag.pretrain.corpus import corpus_sample

EOS, PAD, UNK = "<|end|>", "<|pad|>", "<|unk|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [PAD, EOS, UNK, *ROLE_TOKENS]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
"""Role marker, newline, content, EOS; the generation prompt opens the assistant turn."""


def render_chat(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """What CHAT_TEMPLATE renders, in plain Python (used where no tokenizer exists yet)."""
    text = "".join(f"<|{m['role']}|>\n{m['content']}{EOS}\n" for m in messages)
    return text + ("<|assistant|>\n" if add_generation_prompt else "")


def train_tokenizer(cfg: RecipeConfig) -> PreTrainedTokenizerFast:
    """Train the BPE tokenizer on a corpus sample drawn with the recipe's seed."""
    rng = random.Random(cfg.seed + 1)
    texts = []
    for ex in corpus_sample(rng, cfg, cfg.tokenizer_corpus_size):
        texts.append(render_chat(ex.messages) + ex.completion + EOS)
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Digits(individual_digits=True)
    tok.decoder = decoders.Fuse()
    alphabet = list(string.printable)
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=cfg.max_position_embeddings,
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out: Path) -> None:
    """Save, then make the folder loadable by older loaders too.

    transformers 5 writes ``tokenizer_class: TokenizersBackend`` and the template only to
    ``chat_template.jinja``; naming the class ``PreTrainedTokenizerFast`` and repeating the
    template in ``tokenizer_config.json`` lets transformers 4.x based stacks load it as well.
    """
    tokenizer.save_pretrained(out)
    path = Path(out) / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    data["chat_template"] = CHAT_TEMPLATE
    path.write_text(json.dumps(data, indent=2) + "\n")
