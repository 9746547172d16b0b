"""The one interface every generation backend (transformers, vLLM) implements."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from saturated_dag.tasks.prompts import render_prompt

ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done, total)`` with completed sequences, for run logs."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings of the paper (App. B.1): n=8, T=0.6, top-p 0.95, 2,048 tokens."""

    n: int = 8
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"sampling.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"sampling.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"sampling.max_new_tokens must be >= 1, got {self.max_new_tokens}")


def row_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """The seed of one sampled row: sample ``sample_index`` of prompt ``prompt_index``."""
    raw = hashlib.blake2b(f"{seed}:{prompt_index}:{sample_index}".encode(),
                          digest_size=8).digest()
    return int.from_bytes(raw, "little") & 0x7FFF_FFFF_FFFF_FFFF


def stop_token_ids(configured: int | Sequence[int] | None, tokenizer: Any, model: str
                   ) -> list[int]:
    """The ids that end a completion, as transformers picks them on every backend: the
    generation config's EOS (``configured``), else the tokenizer's; refused when neither
    exists, since generation could then never stop."""
    ids = tokenizer.eos_token_id if configured is None else configured
    if ids is None:
        raise ValueError(f"{model} has no EOS token: generation could never stop")
    return [ids] if isinstance(ids, int) else list(ids)


@dataclass(frozen=True)
class SampleRequest:
    """Prompts to sample with one model: the base model, or the LoRA adapter in ``adapter``
    (a PEFT folder). ``sample_many`` decodes several requests in shared batches."""

    prompts: Sequence[str]
    params: SamplingParams
    adapter: str | Path | None = None


@dataclass
class Sample:
    """One completion of one prompt.

    ``mean_entropy`` is the mean token entropy at temperature 1 over the generated tokens
    (the terminating EOS included), or ``None`` when the backend cannot compute it in the
    generation pass (then a teacher-forced pass supplies it).
    """

    prompt_index: int
    sample_index: int
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" (EOS) or "length" (token limit)
    mean_entropy: float | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


@runtime_checkable
class GenerationBackend(Protocol):
    """Samples n completions for each rendered prompt string."""

    name: str
    tokenizer: Any

    def render(self, user_text: str) -> str:
        """The prompt string for one user message (chat template applied when configured)."""
        ...

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        progress: ProgressFn | None = None,
    ) -> list[list[Sample]]:
        """``result[i][j]`` is sample ``j`` of ``prompts[i]``."""
        ...

    def close(self) -> None:
        """Free the model (GPU memory for vLLM)."""
        ...


class ChatPrompting:
    """Rendering and encoding shared by the backends, so every backend sees the same tokens.

    Needs ``self.tokenizer`` and ``self.chat_template`` ("auto", "always" or "never").
    ``enable_thinking`` is the profile's ``policy.enable_thinking``, passed to chat templates
    that read it (None: the template's default); set it on a backend after loading.
    """

    tokenizer: Any
    chat_template: str
    enable_thinking: bool | None = None

    @property
    def uses_chat_template(self) -> bool:
        has = bool(getattr(self.tokenizer, "chat_template", None))
        return self.chat_template == "always" or (self.chat_template == "auto" and has)

    def render(self, user_text: str) -> str:
        return render_prompt(self.tokenizer, user_text, self.chat_template,  # type: ignore[arg-type]
                             enable_thinking=self.enable_thinking)

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of a rendered prompt (a chat template already carries its special tokens)."""
        return self.tokenizer(prompt, add_special_tokens=not self.uses_chat_template)["input_ids"]
