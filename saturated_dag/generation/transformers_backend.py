"""Batched sampling with transformers on CPU (or one GPU without vLLM).

All prompts x n samples are expanded, sorted by prompt length (less padding) and generated in
batches with left padding; each batch is seeded from the run seed and its position, so a
re-run reproduces it. The mean token entropy comes from the same pass (``EntropyTracker``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessorList

from saturated_dag.generation.base import ProgressFn, Sample, SamplingParams
from saturated_dag.generation.entropy import EntropyTracker
from saturated_dag.generation.models import load_model
from saturated_dag.tasks.prompts import ChatTemplateMode, render_prompt


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids = model.generation_config.eos_token_id
    if ids is None:
        ids = tokenizer.eos_token_id
    if ids is None:
        raise ValueError("model has no EOS token: generation could never stop")
    return [ids] if isinstance(ids, int) else list(ids)


class TransformersBackend:
    """The ``GenerationBackend`` on Hugging Face transformers."""

    name = "transformers"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 64,
        chat_template: ChatTemplateMode = "auto",
        num_threads: int | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.chat_template = chat_template
        if num_threads:
            torch.set_num_threads(num_threads)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.eos_ids = _eos_ids(model, tokenizer)

    @classmethod
    def load(
        cls,
        model: str,
        dtype: str = "float32",
        device: str = "cpu",
        batch_size: int = 64,
        chat_template: ChatTemplateMode = "auto",
        trust_remote_code: bool = False,
    ) -> TransformersBackend:
        loaded, tokenizer = load_model(model, dtype, device, trust_remote_code)
        return cls(loaded, tokenizer, batch_size=batch_size, chat_template=chat_template)

    @property
    def uses_chat_template(self) -> bool:
        has = bool(getattr(self.tokenizer, "chat_template", None))
        return self.chat_template == "always" or (self.chat_template == "auto" and has)

    def render(self, user_text: str) -> str:
        return render_prompt(self.tokenizer, user_text, self.chat_template)

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of a rendered prompt (a chat template already carries its special tokens)."""
        return self.tokenizer(prompt, add_special_tokens=not self.uses_chat_template)["input_ids"]

    def _generation_config(self, params: SamplingParams) -> GenerationConfig:
        # A fresh config: a model's own generation_config may add repetition penalties or
        # top-k=50, which would change both the samples and the entropy the tracker sees.
        greedy = params.temperature == 0
        return GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else params.temperature,
            top_p=None if greedy else params.top_p,
            top_k=None,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.tokenizer.pad_token_id,
        )

    @torch.no_grad()
    def _generate_batch(
        self, prompt_ids: list[list[int]], params: SamplingParams, seed: int
    ) -> list[tuple[list[int], str, float]]:
        width = max(len(p) for p in prompt_ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids])
        tracker = EntropyTracker(width, self.eos_ids)
        torch.manual_seed(seed)
        out = self.model.generate(
            input_ids=input_ids.to(self.model.device),
            attention_mask=mask.to(self.model.device),
            generation_config=self._generation_config(params),
            logits_processor=LogitsProcessorList([tracker]),
        )
        results = []
        for row, mean_entropy in zip(out[:, width:].tolist(), tracker.means(), strict=True):
            tokens, reason = row, "length"
            for i, token in enumerate(row):
                if token in self.eos_ids:
                    tokens, reason = row[: i + 1], "stop"
                    break
            results.append((tokens, reason, mean_entropy))
        return results

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        progress: ProgressFn | None = None,
    ) -> list[list[Sample]]:
        encoded = [self.encode_prompt(p) for p in prompts]
        jobs = [(i, j) for i in range(len(prompts)) for j in range(params.n)]
        jobs.sort(key=lambda job: (-len(encoded[job[0]]), job))
        results: list[list[Sample | None]] = [[None] * params.n for _ in prompts]
        for batch_no, start in enumerate(range(0, len(jobs), self.batch_size)):
            batch = jobs[start : start + self.batch_size]
            seed = params.seed * 1_000_003 + batch_no
            outputs = self._generate_batch([encoded[i] for i, _ in batch], params, seed)
            for (i, j), (tokens, reason, entropy) in zip(batch, outputs, strict=True):
                text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                results[i][j] = Sample(i, j, text, tokens, reason, entropy)
            if progress is not None:
                progress(min(start + self.batch_size, len(jobs)), len(jobs))
        return [[s for s in row if s is not None] for row in results]

    def close(self) -> None:
        self.model = None
