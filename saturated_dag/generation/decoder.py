"""The transformers backend's sampling loop: continuous batching over a slot cache.

Why not ``generate``, nor a batch that decodes until its longest row ends: finished rows
leave such a batch half empty, and each prompt is prefilled once per sample
(docs/performance.md). Here the batch has a fixed number of *slots*. A prompt is admitted when
there are free slots for all of its samples: it is prefilled once and its KV cache is copied
into each of its samples' slots; a finished row frees its slot for the next waiting prompt. So
every decoding step runs a full batch until the queue runs dry.

Layout. Every slot's cache lives in one ``(slots, heads, columns, head_dim)`` buffer per
layer; a decoding step appends one column for all slots. A newly admitted prompt's cache is
written into the columns just before the current one, right-aligned, with the slot's
attention mask zero elsewhere. Position ids are per row, so a row sees exactly the positions
and keys it would see alone. Columns no live row uses are dropped once they are half the buffer.

Sampling. Row ``r`` draws its token at its step ``t`` by inverse CDF from ``u[r, t]``, a
float64 uniform of its own generator (``row_seed``), within the nucleus of transformers'
``TopPLogitsWarper`` after the temperature (``draw_top_p``). So a row's sample is a function
of its prompt, its seed and its model, whichever rows share its batch (the batch shape changes
a logit at most in its last bits), and the same requests give the same schedule and tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from saturated_dag.generation.entropy import token_entropy

Decoded = tuple[list[int], str, float]
"""One row's ``(generated token ids, finish reason, mean entropy at T=1)``."""


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
    costs a large share of a decoding step; a sampled model's nucleus is usually a few tokens, so
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


class GrowingLayer(DynamicLayer):
    """A KV-cache layer in a buffer that doubles when full, instead of a copy per token.

    ``keys``/``values`` are views of the filled part, so attention sees what ``DynamicLayer``
    would give it; appending a token writes one slot (amortised constant cost). The slot
    decoder also writes prompts into given rows (``place``), pads the front (``prepend``) and
    drops unused front columns (``drop_front``). New memory is zeroed: a masked column's
    value is multiplied by an attention weight of exactly 0, which keeps it out only if it is
    finite.
    """

    def _view(self) -> None:
        self.keys = self._k[:, :, : self._length]
        self.values = self._v[:, :, : self._length]

    def _reserve(self, like_k: torch.Tensor, like_v: torch.Tensor, rows: int, end: int,
                 front: int = 0) -> None:
        """A buffer of at least ``end`` columns, the filled part moved ``front`` to the right."""
        if self._k is not None and front == 0 and end <= self._k.shape[-2]:
            return
        capacity = max(end, 2 * (self._k.shape[-2] if self._k is not None else 0), 64)
        k = like_k.new_zeros((rows, like_k.shape[1], capacity, like_k.shape[-1]))
        v = like_v.new_zeros((rows, like_v.shape[1], capacity, like_v.shape[-1]))
        if self._length:
            k[:, :, front : front + self._length] = self._k[:, :, : self._length]
            v[:, :, front : front + self._length] = self._v[:, :, : self._length]
        self._k, self._v = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._length = 0
            self._k = self._v = None
        end = self._length + key_states.shape[-2]
        self._reserve(key_states, value_states, key_states.shape[0], end)
        self._k[:, :, self._length : end] = key_states
        self._v[:, :, self._length : end] = value_states
        self._length = end
        self._view()
        return self.keys, self.values

    def prepend(self, like_k: torch.Tensor, like_v: torch.Tensor, rows: int, columns: int
                ) -> None:
        """``columns`` zero columns before the filled part (allocating the buffer if none)."""
        if not self.is_initialized:
            self.lazy_initialization(like_k, like_v)
            self._length = 0
            self._k = self._v = None
        self._reserve(like_k, like_v, rows, self._length + columns, front=columns)
        self._length += columns
        self._view()

    def place(self, slots: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write ``keys``/``values`` (one row per slot) into the last columns of ``slots``."""
        width = keys.shape[-2]
        self._k[slots, :, self._length - width : self._length] = keys
        self._v[slots, :, self._length - width : self._length] = values

    def drop_front(self, columns: int) -> None:
        """Forget the first ``columns`` columns (no live row attends to them)."""
        self._k = self._k[:, :, columns:]
        self._v = self._v[:, :, columns:]
        self._length -= columns
        self._view()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized and self._k is not None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._view()


def growing_cache(config: Any) -> DynamicCache:
    """A ``DynamicCache`` whose (full-attention) layers are ``GrowingLayer``s."""
    cache = DynamicCache(config=config)
    if all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [GrowingLayer() for _ in cache.layers]
    return cache


ADMIT_AT = 0.25
"""Waiting prompts are admitted once this share of the slots is free (``decode``): a prefill
is a forward pass of its own, so admissions are batched."""

DROP_AT = 64
"""Front columns that no live row attends to are dropped once there are this many (a view of
the buffer, no copy)."""


@dataclass(frozen=True)
class PromptUnit:
    """The samples of one prompt that are decoded together: prefilled once, its cache copied
    into one slot per sample. ``rows`` names each sample (the caller's key) with its seed;
    ``adapter`` is the ``RowAdapters`` index of its LoRA adapter (0: the model as it is)."""

    prompt: list[int]
    rows: tuple[tuple[Any, int], ...]
    adapter: int = 0


@torch.no_grad()
def decode(
    model: Any,
    units: Sequence[PromptUnit],
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    slots: int,
    lora: Any = None,
    on_finished: Callable[[int], None] | None = None,
) -> dict[Any, Decoded]:
    """Every row of ``units`` sampled with continuous batching over ``slots`` slots.

    Units are admitted in the order given (sorted by descending prompt length by the caller,
    so an admitted prompt always fits before the current column); one larger than ``slots``
    is split. ``lora`` (``multi_lora.RowAdapters``) routes each slot to its unit's adapter.
    ``on_finished(rows)`` is called as rows finish. Entropy at temperature 1 is accumulated
    per row from the raw logits of each step, the EOS step included (as ``EntropyTracker``).
    """
    queue: deque[PromptUnit] = deque()
    for unit in units:
        for start in range(0, len(unit.rows), slots):
            queue.append(PromptUnit(unit.prompt, unit.rows[start : start + slots], unit.adapter))
    total = sum(len(u.rows) for u in queue)
    if total == 0:
        return {}
    device = model.device
    width = min(slots, total)
    greedy = temperature == 0
    eos = torch.tensor(sorted(set(eos_ids)), device=device)
    cache = DynamicCache(config=model.config)
    if not all(type(layer) is DynamicLayer for layer in cache.layers):
        # Refused, not guessed: a sliding-window layer keeps only its window, so a slot's
        # columns would not be the ones its row attends to.
        raise ValueError(
            f"the transformers sampler needs full-attention cache layers; "
            f"{type(model).__name__} has "
            f"{sorted({type(layer).__name__ for layer in cache.layers})}: serve this model "
            "with policy.backend: vllm")
    layers = [GrowingLayer() for _ in cache.layers]
    cache.layers = layers  # type: ignore[assignment]

    key: list[Any] = [None] * width  # the row each slot holds
    active = torch.zeros(width, dtype=torch.bool, device=device)
    uniforms = torch.zeros((width, max_new_tokens), dtype=torch.float64, device=device)
    tokens = torch.full((width, max_new_tokens), pad_id, dtype=torch.long, device=device)
    count = torch.zeros(width, dtype=torch.long, device=device)
    entropy = torch.zeros(width, dtype=torch.float64, device=device)
    position = torch.zeros(width, dtype=torch.long, device=device)
    start = torch.zeros(width, dtype=torch.long, device=device)  # first column of the row
    adapter = torch.zeros(width, dtype=torch.long)
    last = torch.full((width,), pad_id, dtype=torch.long, device=device)
    logits: torch.Tensor | None = None
    mask = torch.zeros((width, 0), dtype=torch.long, device=device)
    out: dict[Any, Decoded] = {}
    state = {"columns": 0, "routed": False}
    min_free = max(1, int(ADMIT_AT * width))

    def draw(rows: torch.Tensor) -> None:
        """Each slot in ``rows`` draws its next token from ``logits``; finished rows leave."""
        assert logits is not None
        scores = logits[rows]
        step = count[rows]
        if greedy:
            chosen = scores.argmax(dim=-1)
        else:
            chosen = draw_top_p(scores, temperature, top_p, uniforms[rows, step])
        entropy[rows] += token_entropy(scores).double()
        tokens[rows, step] = chosen
        count[rows] += 1
        last[rows] = chosen
        stopped = torch.isin(chosen, eos)
        done = stopped | (count[rows] == max_new_tokens)
        if bool(done.any()):
            finished = rows[done]
            for slot, stop in zip(finished.tolist(), stopped[done].tolist(), strict=True):
                n = int(count[slot])
                out[key[slot]] = (tokens[slot, :n].tolist(), "stop" if stop else "length",
                                  float(entropy[slot] / n))
                key[slot] = None
            active[finished] = False
            if on_finished is not None:
                on_finished(len(finished))

    def admit() -> None:
        """Fill free slots with waiting prompts (each prefilled once), then draw their first
        tokens."""
        nonlocal logits, mask
        free = (~active).nonzero().squeeze(1).tolist()
        if active.any() and len(free) < min_free:
            return  # a prefill is a forward pass of its own: admit in bulk
        taken: list[tuple[PromptUnit, list[int]]] = []
        while queue and len(queue[0].rows) <= len(free):
            unit = queue.popleft()
            taken.append((unit, free[: len(unit.rows)]))
            free = free[len(unit.rows):]
        if not taken:
            return
        span = max(len(unit.prompt) for unit, _ in taken)
        ids = torch.tensor([[pad_id] * (span - len(u.prompt)) + u.prompt for u, _ in taken],
                           device=device)
        own = torch.tensor([[0] * (span - len(u.prompt)) + [1] * len(u.prompt)
                            for u, _ in taken], device=device)
        prefill = DynamicCache(config=model.config)
        if lora is not None:
            lora.set_rows(torch.tensor([u.adapter for u, _ in taken]))
            state["routed"] = False
        first = model(input_ids=ids, attention_mask=own,
                      position_ids=(own.cumsum(-1) - 1).masked_fill(own == 0, 0),
                      past_key_values=prefill, use_cache=True, logits_to_keep=1
                      ).logits[:, -1, :].float()
        if logits is None:
            logits = first.new_zeros((active.numel(), first.shape[-1]))
        columns = state["columns"]
        if columns < span:  # only before the first step: prompts come longest first
            grow = span - columns
            for layer, source in zip(layers, prefill.layers, strict=True):
                layer.prepend(source.keys, source.values, active.numel(), grow)
            mask = torch.cat([mask.new_zeros((active.numel(), grow)), mask], dim=1)
            start.add_(grow)
            columns = state["columns"] = span
        target = torch.tensor([s for _, group in taken for s in group], device=device)
        source = torch.tensor([i for i, (_, group) in enumerate(taken) for _ in group],
                              device=device)
        for layer, filled in zip(layers, prefill.layers, strict=True):
            layer.place(target, filled.keys[source], filled.values[source])
        mask[target] = 0
        mask[target, columns - span :] = own[source]
        logits[target] = first[source]
        lengths = torch.tensor([len(u.prompt) for u, _ in taken], device=device)[source]
        position[target] = lengths
        start[target] = columns - lengths
        count[target] = 0
        entropy[target] = 0
        active[target] = True
        seeds = [seed for unit, _ in taken for _, seed in unit.rows]
        if not greedy:
            uniforms[target] = row_uniforms(seeds, max_new_tokens).to(device)
        adapter[target.cpu()] = torch.tensor([u.adapter for u, g in taken for _ in g])
        for slot, (row, _) in zip(target.tolist(), (r for u, _ in taken for r in u.rows),
                                  strict=True):
            key[slot] = row
        draw(target)

    admit()
    while bool(active.any()) or queue:
        if not bool(active.any()):
            admit()
            continue
        if lora is not None and not state["routed"]:
            lora.set_rows(adapter)
            state["routed"] = True
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        logits = model(input_ids=last.unsqueeze(1), attention_mask=mask,
                       position_ids=position.unsqueeze(1), past_key_values=cache,
                       use_cache=True).logits[:, -1, :].float()
        state["columns"] += 1
        position.add_(1)
        draw(active.nonzero().squeeze(1))
        admit()
        live = active.nonzero().squeeze(1)
        if not queue and 0 < live.numel() and 4 * (active.numel() - live.numel()) >= \
                active.numel():
            # The queue is dry: drop the idle slots once they are a quarter of the batch
            # (each drop copies every layer's cache, so not at every EOS).
            for layer in layers:
                layer.batch_select_indices(live)
            mask, logits = mask[live], logits[live]
            uniforms, tokens, count, entropy = (uniforms[live], tokens[live], count[live],
                                                entropy[live])
            position, start, last = position[live], start[live], last[live]
            adapter = adapter[live.cpu()]
            key[:] = [key[s] for s in live.tolist()]
            active = active[live]
            state["routed"] = False
        if bool(active.any()):
            unused = int(start[active].min())
            if unused >= DROP_AT:
                for layer in layers:
                    layer.drop_front(unused)
                mask = mask[:, unused:]
                start.sub_(unused)
                state["columns"] -= unused
    if lora is not None:
        lora.set_rows(None)
    return out
