"""The strong judge as a Dagster resource: the chain-sum rubric, or an LLM on its own backend.

The self-judge needs no resource of its own: it is the ``policy`` resource's (cached) backend.
"""

from typing import Any, ClassVar

import dagster as dg
from pydantic import Field

from resources.vllm_fields import VllmEngineResource
from saturated_dag.config import StrongJudgeSettings
from saturated_dag.generation import GenerationBackend, open_backend
from saturated_dag.scorers.judges import Judge, LlmJudge, RubricJudge


class JudgeResource(VllmEngineResource):
    """Fields mirror the profile's ``judges.strong`` section."""

    kind: str = Field("rubric", description="rubric (chain sum only) or llm")
    backend: str = Field("transformers", description="transformers or vllm (kind llm)")
    model: str | None = Field(None, description="judge model (kind llm)")
    dtype: str = "float32"
    device: str = "cpu"
    batch_size: int = 16
    chat_template: str = Field("auto", description="auto, always or never")
    trust_remote_code: bool = False
    instruct: bool = Field(True, description="system/user prompt (True) or full few-shot")
    seed: int = 0

    _loaded: ClassVar[dict[str, GenerationBackend]] = {}

    @classmethod
    def from_settings(cls, strong: StrongJudgeSettings, seed: int = 0) -> "JudgeResource":
        fields: dict[str, Any] = strong.model_dump(exclude={"vllm"})
        return cls(**fields, **strong.vllm.model_dump(), seed=seed)

    def settings(self) -> StrongJudgeSettings:
        """Validated settings: a bad field fails here, before any model loads."""
        from pydantic import ValidationError

        data = self.model_dump()
        vllm = self.split_vllm(data)
        data.pop("seed")
        try:
            return StrongJudgeSettings.model_validate({**data, "vllm": vllm})
        except ValidationError as err:
            raise dg.Failure(f"strong_judge: {err}") from None

    def get_judge(self, max_new_tokens: int, batch_size: int | None = None,
                  log: Any = None) -> Judge:
        """The judge; an LLM's backend is loaded once per process and configuration."""
        settings = self.settings()
        if settings.kind == "rubric":
            return RubricJudge()
        key = settings.model_dump_json() + f"|seed={self.seed}"
        if key not in self._loaded:
            if settings.backend == "vllm":
                # One vLLM engine on the GPU at a time: free the policy's before loading.
                from resources.generation import GenerationResource

                GenerationResource.release_all()
            if log is not None:
                log.info(f"loading strong judge {settings.model} on {settings.backend}")
            self._loaded[key] = open_backend(
                settings.backend, str(settings.model), dtype=settings.dtype,
                device=settings.device, batch_size=settings.batch_size,
                chat_template=settings.chat_template,
                trust_remote_code=settings.trust_remote_code, seed=self.seed,
                vllm_options=settings.vllm.model_dump())
        return LlmJudge(self._loaded[key], instruct=settings.instruct,
                        max_new_tokens=max_new_tokens,
                        batch_size=batch_size or settings.batch_size, name="strong_judge")

    @classmethod
    def release_all(cls) -> None:
        for backend in cls._loaded.values():
            backend.close()
        cls._loaded.clear()
