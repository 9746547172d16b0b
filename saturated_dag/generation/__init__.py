"""Generation backends behind one interface (``GenerationBackend``)."""

from __future__ import annotations

from saturated_dag.generation.base import GenerationBackend, Sample, SamplingParams

BACKENDS = ("transformers", "vllm")


def open_backend(
    backend: str,
    model: str,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    batch_size: int = 64,
    chat_template: str = "auto",
    trust_remote_code: bool = False,
    seed: int = 0,
    vllm_options: dict | None = None,
) -> GenerationBackend:
    """Load ``model`` on the named backend; vLLM is imported only when asked for."""
    if backend == "transformers":
        from saturated_dag.generation.transformers_backend import TransformersBackend

        return TransformersBackend.load(
            model, dtype, device, batch_size, chat_template, trust_remote_code
        )
    if backend == "vllm":
        from saturated_dag.generation.vllm_backend import VllmBackend

        return VllmBackend.load(
            model,
            dtype=dtype,
            chat_template=chat_template,
            trust_remote_code=trust_remote_code,
            seed=seed,
            **(vllm_options or {}),
        )
    raise ValueError(f"unknown generation backend {backend!r}; known: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "GenerationBackend", "Sample", "SamplingParams", "open_backend"]
