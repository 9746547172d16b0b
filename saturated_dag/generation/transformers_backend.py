"""Batched sampling with transformers on CPU (or one GPU without vLLM).

All prompts x n samples are expanded, sorted by prompt length (less padding) and generated in
batches with left padding; each row draws from its own seeded stream (``row_seed``), so a
re-run reproduces it whatever else shares its batch, and the eval sets of several LoRA
adapters decode in one batch (``sample_many``). The mean token entropy comes from the same
pass (``_generate_batch``).
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
from transformers.cache_utils import DynamicLayer

from saturated_dag.generation.base import (
    ChatPrompting,
    ProgressFn,
    Sample,
    SampleRequest,
    SamplingParams,
    row_seed,
)
from saturated_dag.generation.entropy import token_entropy
from saturated_dag.generation.models import load_model
from saturated_dag.generation.multi_lora import RowAdapters, attached_adapters
from saturated_dag.tasks.prompts import ChatTemplateMode


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids = model.generation_config.eos_token_id
    if ids is None:
        ids = tokenizer.eos_token_id
    if ids is None:
        raise ValueError("model has no EOS token: generation could never stop")
    return [ids] if isinstance(ids, int) else list(ids)


def row_uniforms(seeds: Sequence[int], steps: int) -> torch.Tensor:
    """``(rows, steps)`` float64 uniforms in [0, 1): row ``r`` from its own generator."""
    out = torch.empty((len(seeds), steps), dtype=torch.float64)
    generator = torch.Generator()
    for r, seed in enumerate(seeds):
        generator.manual_seed(seed)
        out[r] = torch.rand(steps, generator=generator, dtype=torch.float64)
    return out


def inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Per row, the position whose CDF interval holds the row's uniform: an exact draw from
    ``probs`` (never a zero-probability position), in float64 so the mass sums cleanly."""
    cdf = probs.double().cumsum(dim=-1)
    target = (uniforms.to(cdf.device) * cdf[:, -1]).unsqueeze(1)
    chosen = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return chosen.clamp(max=probs.shape[-1] - 1)


TOP_P_PROBE = 32
"""Tokens ranked per row before falling back to a full sort (``draw_top_p``)."""


def draw_top_p(logits: torch.Tensor, temperature: float, top_p: float,
               uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row from softmax(logits / T) restricted to its top-p nucleus.

    The nucleus is that of transformers' ``TopPLogitsWarper``: the most likely tokens while
    the mass before them is below ``top_p`` (the first always). A full sort of the vocabulary
    was a quarter of a decoding step; a sampled model's nucleus is usually a few tokens, so
    each row ranks only its ``TOP_P_PROBE`` likeliest, and the rows whose probe holds less
    than ``top_p`` of the mass are sorted in full. Drawn by inverse CDF over the nucleus in
    rank order (``uniforms``: one per row).
    """
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p >= 1.0:
        return inverse_cdf(probs, uniforms)
    k = min(TOP_P_PROBE, probs.shape[-1])
    top, index = probs.topk(k, dim=-1)
    short = top.sum(dim=-1) < top_p
    if bool(short.any()):  # the probe misses part of the nucleus: rank these rows in full
        full_top, full_index = probs[short].sort(dim=-1, descending=True)
        chosen = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
        chosen[short] = _nucleus_draw(full_top, full_index, top_p, uniforms[short])
        if bool((~short).any()):
            chosen[~short] = _nucleus_draw(top[~short], index[~short], top_p,
                                           uniforms[~short])
        return chosen
    return _nucleus_draw(top, index, top_p, uniforms)


def _nucleus_draw(top: torch.Tensor, index: torch.Tensor, top_p: float,
                  uniforms: torch.Tensor) -> torch.Tensor:
    """Draw among descending probabilities ``top`` (token ids ``index``) within the nucleus."""
    before = top.cumsum(dim=-1) - top
    kept = top.masked_fill(before >= top_p, 0.0)
    kept[:, 0] = top[:, 0]
    return index.gather(1, inverse_cdf(kept, uniforms).unsqueeze(1)).squeeze(1)


class _GrowingLayer(DynamicLayer):
    """A KV-cache layer in a buffer that doubles when full, instead of a copy per token.

    ``keys``/``values`` are views of the filled part, so attention sees what ``DynamicLayer``
    would give it; appending a token writes one slot (amortised constant cost).
    """

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._length = 0
            self._k = self._v = None
        new = key_states.shape[-2]
        end = self._length + new
        if self._k is None or end > self._k.shape[-2]:
            capacity = max(end, 2 * (self._k.shape[-2] if self._k is not None else 0), 64)
            shape = (*key_states.shape[:2], capacity, key_states.shape[-1])
            k = key_states.new_empty(shape)
            v = value_states.new_empty((*shape[:3], value_states.shape[-1]))
            if self._length:
                k[:, :, : self._length] = self._k[:, :, : self._length]
                v[:, :, : self._length] = self._v[:, :, : self._length]
            self._k, self._v = k, v
        self._k[:, :, self._length : end] = key_states
        self._v[:, :, self._length : end] = value_states
        self._length = end
        self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized and self._k is not None:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys = self._k[:, :, : self._length]
            self.values = self._v[:, :, : self._length]


def _growing_cache(config: Any) -> DynamicCache:
    """A ``DynamicCache`` whose (full-attention) layers are ``_GrowingLayer``s."""
    cache = DynamicCache(config=config)
    if all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [_GrowingLayer() for _ in cache.layers]
    return cache


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
        self,
        prompt_ids: list[list[int]],
        params: SamplingParams,
        row_seeds: Sequence[int],
        row_adapters: torch.Tensor | None = None,
        lora: RowAdapters | None = None,
    ) -> list[tuple[list[int], str, float]]:
        """Sample one completion per prompt, each row with its own random stream.

        Why not ``generate``: it keeps every row of a batch in every forward pass until the
        longest one ends, grows its KV cache by concatenation (quadratic copying), and draws
        all rows from one random stream, so a row's sample depends on which rows share its
        batch. This loop drops finished rows (and their cache rows) once they are a quarter of
        the batch, keeps each layer's cache in a buffer that grows geometrically, and draws
        row ``r``'s token at step ``t`` by inverse CDF from ``u[r, t]``, a uniform of the
        row's own generator (``row_seeds[r]``), within the nucleus ``generate``'s warpers
        would keep (temperature, then top-p: ``draw_top_p``). So the distribution is
        ``generate``'s, and a row's sample is a function of its prompt, its seed and its
        model only. Entropy at temperature 1 is accumulated per row from the raw logits of
        each step, the EOS step included (as ``EntropyTracker`` does).

        ``row_adapters`` (with ``lora``, from ``attached_adapters``) routes each row to its
        LoRA adapter (0: the base model).
        """
        rows = len(prompt_ids)
        width = max(len(p) for p in prompt_ids)
        pad = self.tokenizer.pad_token_id
        device = self.model.device
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids],
                                 device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids],
                            device=device)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
        greedy = params.temperature == 0
        uniforms = None if greedy else row_uniforms(row_seeds, params.max_new_tokens).to(device)
        eos = torch.tensor(sorted(set(self.eos_ids)), device=device)
        cache = _growing_cache(self.model.config)
        if lora is not None:
            lora.set_rows(row_adapters)
        live = torch.arange(rows, device=device)  # original row of each batch row
        active = torch.ones(rows, dtype=torch.bool, device=device)  # not yet finished
        tokens = torch.full((rows, params.max_new_tokens), pad, dtype=torch.long, device=device)
        entropy = torch.zeros(rows, dtype=torch.float64, device=device)
        count = torch.zeros(rows, dtype=torch.long, device=device)
        stopped = torch.zeros(rows, dtype=torch.bool, device=device)
        logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            past_key_values=cache, use_cache=True, logits_to_keep=1
                            ).logits[:, -1, :].float()
        for step in range(params.max_new_tokens):
            if greedy:
                chosen = logits.argmax(dim=-1)
            else:
                assert uniforms is not None
                chosen = draw_top_p(logits, params.temperature, params.top_p,
                                    uniforms[live, step])
            owners = live[active]  # original rows still generating
            entropy[owners] += token_entropy(logits[active]).double()
            count[owners] += 1
            tokens[owners, step] = chosen[active]
            done = torch.isin(chosen, eos) & active
            stopped[live[done]] = True
            active &= ~done
            rows_left = int(active.sum())
            finished = active.numel() - rows_left
            if rows_left == 0 or step + 1 == params.max_new_tokens:
                break
            if 4 * finished >= active.numel():
                # Drop finished rows (and their cache rows) once they are a quarter of the
                # batch: each drop copies every layer's cache, so not at every EOS.
                keep = torch.nonzero(active).squeeze(1)
                live, mask, positions = live[keep], mask[keep], positions[keep]
                chosen, active = chosen[keep], active[keep]
                cache.batch_select_indices(keep)
                if lora is not None:
                    lora.select(keep)
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
            positions = positions[:, -1:] + 1
            logits = self.model(input_ids=chosen.unsqueeze(1), attention_mask=mask,
                                position_ids=positions, past_key_values=cache, use_cache=True
                                ).logits[:, -1, :].float()
        if lora is not None:
            lora.set_rows(None)
        counts, means = count.tolist(), (entropy / count.clamp(min=1)).tolist()
        reasons = ["stop" if s else "length" for s in stopped.tolist()]
        out = tokens.tolist()
        return [(out[r][: counts[r]], reasons[r], means[r]) for r in range(rows)]

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
        """Every request's samples (``result[r][i][j]``: request r, prompt i, sample j) in
        shared batches of ``batch_size`` rows (default: the backend's).

        Each request may name a LoRA adapter folder (None: the base model); the adapters are
        attached to the loaded model for the call (``multi_lora``) and each row runs with its
        own. Sample ``j`` of prompt ``i`` of a request is drawn from the seed
        ``row_seed(params.seed, i, j)`` of that request, so it does not depend on the other
        requests or on how the rows were batched. Rows are sorted by prompt length (less
        padding); requests whose decoding settings differ are never batched together.
        """
        size = batch_size or self.batch_size
        folders = list(dict.fromkeys(str(r.adapter) for r in requests if r.adapter is not None))
        slot = {folder: k for k, folder in enumerate(folders, start=1)}
        encoded = [[self.encode_prompt(p) for p in r.prompts] for r in requests]
        jobs = [(r, i, j) for r, request in enumerate(requests)
                for i in range(len(request.prompts)) for j in range(request.params.n)]

        def settings(r: int) -> tuple[float, float, int]:
            p = requests[r].params
            return (p.temperature, p.top_p, p.max_new_tokens)

        jobs.sort(key=lambda job: (settings(job[0]), -len(encoded[job[0]][job[1]]), job))
        results: list[list[list[Sample | None]]] = [
            [[None] * r.params.n for _ in r.prompts] for r in requests]
        batches: list[list[tuple[int, int, int]]] = []
        for job in jobs:
            if (not batches or len(batches[-1]) == size
                    or settings(batches[-1][0][0]) != settings(job[0])):
                batches.append([])
            batches[-1].append(job)
        done = 0
        context = attached_adapters(self.model, folders) if folders else nullcontext(None)
        with context as lora:
            for batch in batches:
                params = requests[batch[0][0]].params
                seeds = [row_seed(requests[r].params.seed, i, j) for r, i, j in batch]
                adapters = torch.tensor([
                    slot[str(requests[r].adapter)] if requests[r].adapter is not None else 0
                    for r, _, _ in batch])
                outputs = self._generate_batch([encoded[r][i] for r, i, _ in batch], params,
                                               seeds, adapters, lora)
                for (r, i, j), (tokens, reason, entropy) in zip(batch, outputs, strict=True):
                    text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                    results[r][i][j] = Sample(i, j, text, tokens, reason, entropy)
                done += len(batch)
                if progress is not None:
                    progress(done, len(jobs))
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
            cache = _growing_cache(self.model.config)
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
