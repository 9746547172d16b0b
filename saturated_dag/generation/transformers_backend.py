"""Batched sampling with transformers on CPU (or one GPU without vLLM).

Prompts are decoded with continuous batching (``decoder``): each prompt prefilled once for its
n samples, a finished row's slot refilled by the next waiting prompt; each row draws from its
own seeded stream (``row_seed``), so a re-run reproduces it whatever else shares its batch,
and the eval sets of several LoRA adapters decode in one batch (``sample_many``). The mean
token entropy comes from the same pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from transformers import (
    DynamicCache,
    GenerationConfig,
    StoppingCriteria,
)

from saturated_dag.generation.base import (
    ChatPrompting,
    ProgressFn,
    Sample,
    SampleRequest,
    SamplingParams,
    row_seed,
    stop_token_ids,
)
from saturated_dag.generation.decoder import PromptUnit, decode, growing_cache
from saturated_dag.generation.models import load_model
from saturated_dag.generation.multi_lora import attached_adapters, merged_adapter
from saturated_dag.tasks.prompts import ChatTemplateMode


class _TextStop(StoppingCriteria):
    """Stops each sequence once ``stop(decoded generated text)`` holds."""

    def __init__(self, tokenizer: Any, start: int, stop: Callable[[str], bool]):
        self.tokenizer, self.start, self.stop = tokenizer, start, stop

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        done = [
            self.stop(self.tokenizer.decode(row[self.start:], skip_special_tokens=True))
            for row in input_ids.tolist()
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class TransformersBackend(ChatPrompting):
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
        self.eos_ids = stop_token_ids(model.generation_config.eos_token_id, tokenizer,
                                      "model")

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

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        progress: ProgressFn | None = None,
    ) -> list[list[Sample]]:
        return self.sample_many([SampleRequest(prompts, params)], progress)[0]

    def sample_many(
        self,
        requests: Sequence[SampleRequest],
        progress: ProgressFn | None = None,
        batch_size: int | None = None,
    ) -> list[list[list[Sample]]]:
        """Every request's samples (``result[r][i][j]``: request r, prompt i, sample j),
        decoded with continuous batching over ``batch_size`` slots (default: the backend's).

        Each request may name a LoRA adapter folder (None: the base model). When every
        request names the same one, it is merged into the weights for the call (PEFT's
        merge; the weights are restored exactly after), which spares the unmerged update's
        two extra products per layer; otherwise the adapters are attached (``multi_lora``)
        and each row runs with its own. Sample ``j`` of prompt ``i`` of a request is drawn
        from the seed ``row_seed(params.seed, i, j)`` of that request, so it does not depend
        on the other requests or on the schedule (``decoder``). Prompts are admitted longest
        first; requests whose decoding settings differ are decoded one after the other.
        """
        size = batch_size or self.batch_size
        folders = list(dict.fromkeys(str(r.adapter) for r in requests if r.adapter is not None))
        merge = len(folders) == 1 and all(r.adapter is not None for r in requests)
        slot = {folder: (0 if merge else k) for k, folder in enumerate(folders, start=1)}
        groups: dict[tuple[float, float, int], list[tuple[int, int, int, PromptUnit]]] = {}
        for r, request in enumerate(requests):
            p = request.params
            adapter = slot[str(request.adapter)] if request.adapter is not None else 0
            for i, prompt in enumerate(request.prompts):
                ids = self.encode_prompt(prompt)
                rows = tuple(((r, i, j), row_seed(p.seed, i, j)) for j in range(p.n))
                groups.setdefault((p.temperature, p.top_p, p.max_new_tokens), []).append(
                    (-len(ids), r, i, PromptUnit(ids, rows, adapter)))
        total = sum(len(r.prompts) * r.params.n for r in requests)
        done = [0]

        def finished(rows: int) -> None:
            done[0] += rows
            if progress is not None:
                progress(done[0], total)

        results: list[list[list[Sample | None]]] = [
            [[None] * r.params.n for _ in r.prompts] for r in requests]
        if merge:
            context = merged_adapter(self.model, folders[0])
        else:
            context = attached_adapters(self.model, folders) if folders else nullcontext(None)
        with context as lora:
            for (temperature, top_p, max_new), units in sorted(groups.items()):
                decoded = decode(self.model, [u for *_, u in sorted(units, key=lambda x: x[:3])],
                                 temperature, top_p, max_new, self.eos_ids,
                                 self.tokenizer.pad_token_id, size, lora=lora,
                                 on_finished=finished)
                for (r, i, j), (tokens, reason, entropy) in decoded.items():
                    text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                    results[r][i][j] = Sample(i, j, text, tokens, reason, entropy)
        return [[[s for s in row if s is not None] for row in request] for request in results]

    # --- Greedy decoding with a shared, cached prompt prefix (LLM-as-a-judge) ----------------
    #
    # Every judge prompt of a task starts with the same few-shot / system text. Its KV cache is
    # computed once and a copy, repeated over the batch, seeds each batch. Sequences are laid
    # out as [prefix][pads][suffix]: the padding sits *between* the cached prefix and each
    # prompt's own suffix, masked out; position ids follow the attention mask (cumsum), so the
    # suffix continues right after the prefix exactly as in an unpadded sequence.

    def _shared_prefix(self, encoded: Sequence[list[int]]) -> list[int]:
        """Longest common token prefix, leaving at least one uncached token per prompt."""
        first = encoded[0]
        limit = min(len(e) for e in encoded) - 1
        n = 0
        while n < limit and all(e[n] == first[n] for e in encoded):
            n += 1
        return list(first[:n])

    @torch.no_grad()
    def _prefix_cache(self, prefix: list[int]) -> DynamicCache | None:
        """The prefix's KV cache (batch 1), computed once per distinct prefix and kept."""
        if not prefix:
            return None
        key = tuple(prefix)
        cached = getattr(self, "_prefix_kv", None)
        if cached is None or cached[0] != key:
            cache = DynamicCache(config=self.model.config)
            ids = torch.tensor([prefix], device=self.model.device)
            self.model(input_ids=ids, past_key_values=cache, use_cache=True)
            self._prefix_kv = (key, cache)
            self.prefix_cache_builds = getattr(self, "prefix_cache_builds", 0) + 1
        return self._prefix_kv[1]

    @torch.no_grad()
    def _prefixed_generate(
        self,
        prefix: list[int],
        suffixes: Sequence[list[int]],
        max_new_tokens: int,
        stop: Callable[[str], bool] | None,
        want_logits: bool,
    ) -> tuple[list[list[int]], torch.Tensor | None]:
        width = max(len(s) for s in suffixes)
        pad = self.tokenizer.pad_token_id
        rows = [prefix + [pad] * (width - len(s)) + s for s in suffixes]
        mask = [[1] * len(prefix) + [0] * (width - len(s)) + [1] * len(s) for s in suffixes]
        device = self.model.device
        kwargs: dict[str, Any] = {}
        base = self._prefix_cache(prefix)
        if base is not None:
            # The prefix's keys/values, repeated over the batch, in a cache that grows by
            # doubling (not one concatenation, of the whole prefix too, per generated token).
            cache = growing_cache(self.model.config)
            for layer, source in zip(cache.layers, base.layers, strict=True):
                layer.update(source.keys.repeat_interleave(len(suffixes), dim=0),
                             source.values.repeat_interleave(len(suffixes), dim=0))
            kwargs["past_key_values"] = cache
        start = len(prefix) + width
        criteria = [_TextStop(self.tokenizer, start, stop)] if stop is not None else None
        config = self._generation_config(
            SamplingParams(n=1, temperature=0, max_new_tokens=max_new_tokens))
        config.return_dict_in_generate = True
        config.output_logits = want_logits
        out = self.model.generate(
            input_ids=torch.tensor(rows, device=device),
            attention_mask=torch.tensor(mask, device=device),
            generation_config=config,
            stopping_criteria=criteria,
            **kwargs,
        )
        tokens = []
        for row in out.sequences[:, start:].tolist():
            for i, token in enumerate(row):
                if token in self.eos_ids:
                    row = row[: i + 1]
                    break
            tokens.append(row)
        logits = out.logits[0].float().cpu() if want_logits else None
        return tokens, logits

    def greedy_shared_prefix(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Callable[[str], bool] | None = None,
        batch_size: int | None = None,
        progress: ProgressFn | None = None,
    ) -> list[tuple[list[int], str]]:
        """Greedy completions of rendered prompts, reusing the cached common prefix.

        ``stop(text)`` ends a sequence once its generated text satisfies it (e.g. a complete
        ``Judgment: [N]``); EOS ends it too. Returns ``(token_ids, text)`` per prompt.
        """
        if not prompts:
            return []
        encoded = [self.encode_prompt(p) for p in prompts]
        prefix = self._shared_prefix(encoded)
        suffixes = [e[len(prefix):] for e in encoded]
        order = sorted(range(len(prompts)), key=lambda i: (-len(suffixes[i]), i))
        size = batch_size or self.batch_size
        results: list[tuple[list[int], str] | None] = [None] * len(prompts)
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            tokens, _ = self._prefixed_generate(
                prefix, [suffixes[i] for i in batch], max_new_tokens, stop, want_logits=False)
            for i, toks in zip(batch, tokens, strict=True):
                results[i] = (toks, self.tokenizer.decode(toks, skip_special_tokens=True))
            if progress is not None:
                progress(min(start + size, len(order)), len(order))
        return [r for r in results if r is not None]

    def choose_next_token(
        self,
        texts: Sequence[str],
        candidates: Sequence[int],
        batch_size: int | None = None,
    ) -> list[int]:
        """For each text, the position in ``candidates`` of the likeliest next token among them.

        One forward step per text (the cached common prefix reused): an argmax restricted to
        the candidate token ids, so a verdict always exists.
        """
        if not texts:
            return []
        encoded = [self.encode_prompt(t) for t in texts]
        prefix = self._shared_prefix(encoded)
        suffixes = [e[len(prefix):] for e in encoded]
        allowed = torch.tensor(list(candidates), dtype=torch.long)
        size = batch_size or self.batch_size
        picks: list[int] = []
        for start in range(0, len(texts), size):
            _, logits = self._prefixed_generate(
                prefix, suffixes[start : start + size], 1, None, want_logits=True)
            assert logits is not None
            picks.extend(logits[:, allowed].argmax(dim=-1).tolist())
        return picks

    def close(self) -> None:
        self.model = None
        self._prefix_kv = None
