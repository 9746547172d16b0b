"""The policy model's generation backend (transformers or vLLM) as a Dagster resource.

The loaded backend is cached per process and per configuration, so assets that run in one
process (the in-process executor, or one multi-asset) load the model once per run.
"""

from typing import Any, ClassVar

import dagster as dg
from pydantic import Field

from resources.vllm_fields import VllmEngineResource
from saturated_dag.config import PolicySettings
from saturated_dag.generation import GenerationBackend, open_backend
from saturated_dag.generation.base import ChatPrompting
from saturated_dag.generation.models import resolve as resolve_model


class GenerationResource(VllmEngineResource):
    """Serves the policy model. Fields mirror the profile's ``policy`` section."""

    backend: str = Field("transformers", description="transformers or vllm")
    model: str = Field(description="local folder, .gguf file, packaged short name or hub id")
    dtype: str = "float32"
    device: str = "cpu"
    batch_size: int = 64
    chat_template: str = Field("auto", description="auto, always or never")
    enable_thinking: bool | None = Field(
        None, description="passed to chat templates that read it (Qwen3: false samples without "
        "a <think> block); null: the template's default")
    trust_remote_code: bool = False
    seed: int = 0

    _loaded: ClassVar[dict[str, GenerationBackend]] = {}

    @classmethod
    def from_settings(cls, policy: PolicySettings, seed: int = 0) -> "GenerationResource":
        fields: dict[str, Any] = policy.model_dump(exclude={"vllm"})
        return cls(**fields, **policy.vllm.model_dump(), seed=seed)

    def settings(self) -> PolicySettings:
        """Validated settings: a bad field fails here, before any model loads."""
        from saturated_dag.config import ProfileError, parse_profile

        data = self.model_dump()
        vllm = self.split_vllm(data)
        data.pop("seed")
        try:
            profile = parse_profile({"name": "resource", "tasks": ["chain_sum"],
                                     "policy": {**data, "vllm": vllm}}, "generation resource")
            resolve_model(profile.policy.model)  # unknown name / missing path: fail now
        except (ProfileError, ValueError, FileNotFoundError) as err:
            raise dg.Failure(f"policy: {err}") from None
        return profile.policy

    def get_backend(self, log: Any = None) -> GenerationBackend:
        settings = self.settings()
        key = settings.model_dump_json() + f"|seed={self.seed}"
        if key not in self._loaded:
            if log is not None:
                log.info(f"loading {settings.model} on {settings.backend} ({settings.device})")
            self._loaded[key] = backend = open_backend(
                settings.backend,
                settings.model,
                dtype=settings.dtype,
                device=settings.device,
                batch_size=settings.batch_size,
                chat_template=settings.chat_template,
                trust_remote_code=settings.trust_remote_code,
                seed=self.seed,
                vllm_options=settings.vllm.model_dump(),
            )
            if isinstance(backend, ChatPrompting):
                backend.enable_thinking = settings.enable_thinking
        return self._loaded[key]

    @classmethod
    def release_all(cls) -> None:
        """Free every cached backend (vLLM holds GPU memory until closed)."""
        for backend in cls._loaded.values():
            backend.close()
        cls._loaded.clear()
