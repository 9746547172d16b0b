"""The vLLM engine fields that every model-serving resource shares (the profile's ``vllm``)."""

from typing import Any

import dagster as dg

from saturated_dag.config import VllmSettings


class VllmEngineResource(dg.ConfigurableResource):
    """Base of the resources that may start a vLLM engine; fields mirror ``VllmSettings``."""

    gpu_memory_utilization: float = 0.85
    enforce_eager: bool = False
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool = True
    enable_lora: bool = False
    max_lora_rank: int = 64
    max_loras: int = 1

    @staticmethod
    def split_vllm(data: dict[str, Any]) -> dict[str, Any]:
        """Pop the vLLM fields out of a ``model_dump()`` into the profile's ``vllm`` shape."""
        return {k: data.pop(k) for k in VllmSettings.model_fields}
