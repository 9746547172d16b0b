"""The models a profile runs and the backends that serve them: the policy (``policy``) and the
two pairwise judges (``judges``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from saturated_dag.config.base import Strict


class VllmSettings(Strict):
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    enforce_eager: bool = False
    max_model_len: int | Literal["auto"] | None = None
    """The engine's context in tokens. ``auto``: computed when the engine starts, from the
    profile and the model's tokenizer, as the longest prompt it will serve plus what it
    generates (for the policy: the self-judge's few-shot prompt with the task's longest
    question, two completions of ``sampling.max_new_tokens`` and a judgment of
    ``scoring.judge_max_new_tokens``; ``saturated_dag.profiles.engine_context``). A number
    smaller than that is refused, with the numbers, before the engine loads. None: the
    model's own maximum (vLLM's default)."""
    tensor_parallel_size: int = Field(1, ge=1)
    enable_prefix_caching: bool = True
    enable_lora: bool = False
    """Serve adapters as LoRA requests on the policy's engine (eval without reloading)."""
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 64
    max_loras: int = Field(1, ge=1)


class PolicySettings(Strict):
    """The policy model and the backend that serves it."""

    backend: Literal["transformers", "vllm"] = "transformers"
    model: str
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    batch_size: int = Field(64, ge=1)
    chat_template: Literal["auto", "always", "never"] = "auto"
    enable_thinking: bool | None = None
    """Passed to chat templates that know it (Qwen3 hybrid models): False samples without a
    ``<think>`` block. None: the template's own default. Ignored without a chat template."""
    trust_remote_code: bool = False
    vllm: VllmSettings = VllmSettings()


class SelfJudgeSettings(Strict):
    """The self-judge: the policy model itself (the ``policy`` backend) judging pairs."""

    instruct: bool = False
    """False: the full few-shot prompt (base models); True: the system/user pair (App. D)."""


class StrongJudgeSettings(Strict):
    """The strong judge: the chain-sum rubric, or any LLM on its own backend."""

    kind: Literal["rubric", "llm"] = "rubric"
    backend: Literal["transformers", "vllm"] = "transformers"
    model: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    batch_size: int = Field(16, ge=1)
    chat_template: Literal["auto", "always", "never"] = "auto"
    trust_remote_code: bool = False
    instruct: bool = True
    vllm: VllmSettings = VllmSettings()

    @model_validator(mode="after")
    def _llm_needs_model(self) -> StrongJudgeSettings:
        if self.kind == "llm" and not self.model:
            raise ValueError("kind 'llm' needs a model (local folder, short name or hub id)")
        return self


class JudgeSettings(Strict):
    """The two pairwise judges of Sec. 3.2 / App. D."""

    self_judge: SelfJudgeSettings = SelfJudgeSettings()
    strong: StrongJudgeSettings = StrongJudgeSettings()
