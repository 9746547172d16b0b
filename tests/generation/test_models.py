from pathlib import Path

import pytest

from saturated_dag.generation import models, open_backend


def test_resolve_kinds(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert models.resolve(str(tiny_model_dir)).kind == "folder"
    assert models.resolve("Qwen/Qwen3-1.7B-Base").kind == "hub"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.resolve(str(gguf)).kind == "gguf"


def test_unknown_model_name_is_named() -> None:
    with pytest.raises(ValueError, match="unknown model name 'gpt-17'"):
        models.resolve("gpt-17")


def test_missing_model_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="model path not found"):
        models.resolve(str(tmp_path / "absent" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        models.resolve(str(tmp_path / "empty"))


def test_a_model_folder_without_its_tokenizer_is_named_and_not_observed(tmp_path: Path) -> None:
    """Issue 67: a copy of the embedded model without ``tokenizer.json`` fails with an error
    naming the folder and the file (transformers' own names neither and points at
    sentencepiece), and the ``base_model`` observation refuses it: the asset's data version
    stays the one observed before the file went missing."""
    import shutil

    import dagster as dg

    from tests.pipeline import graph, materialize, resources

    copy = tmp_path / "arith_base"
    shutil.copytree(Path(models.resolve("arith-base").location), copy)
    overrides = {"policy": {"model": str(copy)}}
    assets, _ = graph("demo", overrides)
    res = resources(tmp_path / "out", "demo", overrides)
    instance = dg.DagsterInstance.ephemeral()
    key = dg.AssetKey("base_model")

    def version() -> str | None:
        record = instance.get_latest_data_version_record(key, is_source=True)
        return record.asset_observation.data_version if record else None

    assert materialize(assets, [key], resources=res, instance=instance).success
    before = version()
    assert before == models.model_fingerprint(str(copy))

    (copy / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError) as refused:
        models.load_model(str(copy))
    assert str(copy) in str(refused.value) and "tokenizer.json" in str(refused.value)
    observed = materialize(assets, [key], resources=res, instance=instance,
                           raise_on_error=False)
    assert not observed.success
    failure = next(e for run in observed.runs for e in run.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.to_string()  # with its cause
    assert str(copy) in message and "tokenizer.json" in message, message
    assert version() == before  # the broken folder is no new data version

    (copy / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors \(its weights\), no "
                       r"tokenizer\.json"):
        models.check_model_folder(copy)


def test_unknown_backend_is_named(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown generation backend 'jax'"):
        open_backend("jax", str(tiny_model_dir))


# --- policy.enable_thinking: the Qwen3 hybrid templates' switch ------------------------------

# ChatML with Qwen3's switch: thinking off closes an empty <think> block in the prompt.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)
THINK_OFF = "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def _thinking_tokenizer():
    from tests.tiny_models import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = THINKING_TEMPLATE
    return tokenizer


def test_render_prompt_passes_the_thinking_switch() -> None:
    from saturated_dag.tasks.prompts import render_prompt

    tokenizer = _thinking_tokenizer()
    off = render_prompt(tokenizer, "1 + 2 =", "always", enable_thinking=False)
    on = render_prompt(tokenizer, "1 + 2 =", "always", enable_thinking=True)
    default = render_prompt(tokenizer, "1 + 2 =", "always")
    assert off.endswith(THINK_OFF) and off.startswith("<|im_start|>user\n1 + 2 =")
    assert on == default and default.endswith("<|im_start|>assistant\n")
    assert "<think>" not in default
    assert render_prompt(tokenizer, "1 + 2 =", "never", enable_thinking=False) == "1 + 2 ="


def test_backend_renders_with_its_thinking_switch() -> None:
    from saturated_dag.generation.base import ChatPrompting

    class Rendering(ChatPrompting):
        tokenizer = _thinking_tokenizer()
        chat_template = "auto"

    backend = Rendering()
    assert backend.render("x").endswith("<|im_start|>assistant\n")  # None: template default
    backend.enable_thinking = False
    assert backend.render("x").endswith(THINK_OFF)


def test_policy_resource_carries_the_thinking_switch_into_pool_prompts(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """paper_instruct's `enable_thinking: false` reaches the loaded backend, so the pool's
    stored prompts (which SFT/DPO/σ-RRHF train on) carry the closed think block."""
    import shutil

    import dagster as dg

    from resources import make_resources
    from saturated_dag.data.pool import generate_pool
    from saturated_dag.generation.base import SamplingParams
    from saturated_dag.profiles import load_profile
    from saturated_dag.tasks import chain_sum

    folder = tmp_path / "thinking_model"
    shutil.copytree(tiny_model_dir, folder)
    _thinking_tokenizer().save_pretrained(folder)
    policy = {"backend": "transformers", "model": str(folder), "dtype": "float32",
              "device": "cpu", "batch_size": 4}
    assert load_profile("paper_instruct").policy.enable_thinking is False
    question = chain_sum.build_pool("D", [(2, 1)], 1, 0)[0]
    # the resource is set up and torn down as in a run: its engines close at the end
    # sized to the tiny model's 512-token context, which the policy's engine checks
    tiny = {"policy": policy, "sampling": {"max_new_tokens": 16},
            "gsm8k": {"train_limit": 12, "test_limit": 2},
            "training": {"gsm8k_validation_questions": 2}}
    with dg.build_resources(make_resources("paper_instruct", str(tmp_path / "out"),
                                           tiny)) as live:
        assert live.inference.policy_settings().enable_thinking is False
        pool = generate_pool([question], live.inference.policy_backend(),
                             SamplingParams(n=1, max_new_tokens=2))
        assert pool["prompt"][0].endswith(THINK_OFF)
    with dg.build_resources(make_resources("demo", str(tmp_path / "demo_out"),
                                           {"policy": policy})) as live:
        default = live.inference.policy_backend()
        assert default.render(question.prompt_text).endswith("<|im_start|>assistant\n")


def test_adapter_eval_backends_keep_the_base_backends_thinking_switch(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """An adapter's eval report samples the same prompts as the base model's: the merged
    transformers backend inherits ``enable_thinking`` (paper_instruct: off)."""
    import shutil

    from peft import LoraConfig, get_peft_model

    from saturated_dag.evaluation.reports import adapter_backends
    from saturated_dag.generation.models import load_model
    from saturated_dag.generation.transformers_backend import TransformersBackend

    folder = tmp_path / "thinking_model"
    shutil.copytree(tiny_model_dir, folder)
    _thinking_tokenizer().save_pretrained(folder)
    model, _ = load_model(str(folder))
    get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(
        tmp_path / "adapter")
    base = TransformersBackend.load(str(folder), chat_template="always")
    base.enable_thinking = False
    (merged,) = adapter_backends(base, [tmp_path / "adapter"], base_model=str(folder)).values()
    assert merged.enable_thinking is False
    assert merged.render("1 + 2 =") == base.render("1 + 2 =")
    assert merged.render("1 + 2 =").endswith(THINK_OFF)
