"""The pretraining recipe, scaled down to seconds, and the shipped checkpoint."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from saturated_dag.pretrain import RecipeConfig, run_recipe
from saturated_dag.pretrain.corpus import judge_example, policy_example
from saturated_dag.pretrain.tokenizer import train_tokenizer
from saturated_dag.pretrain.train import encode, render_example_prompt
from saturated_dag.scorers.judge_prompts import parse_judgment
from saturated_dag.scorers.rubric import boxed_answer
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt, render_prompt
from saturated_dag.tasks.solution_styles import Expression
from tests.conftest import REPO_ROOT

SHIPPED = REPO_ROOT / "saturated_dag" / "models" / "arith_base"


def _generate(folder: Path, expr: str, do_sample: bool) -> str:
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    prompt = render_prompt(tok, policy_prompt(chain_sum_problem(expr)), "auto")
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(0)
    out = model.generate(**enc, max_new_tokens=60, do_sample=do_sample)
    return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tiny")
    return out, run_recipe(RecipeConfig.tiny(), out)


def test_tiny_recipe_writes_a_loadable_hf_folder(tiny_run: tuple[Path, dict]) -> None:
    out, prov = tiny_run
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (out / name).is_file()
    saved = json.loads((out / "PROVENANCE.json").read_text())
    assert saved == prov and prov["steps"] == 6 and len(prov["loss_curve"]) == 6
    assert prov["config"]["seed"] == 0 and prov["recipe_sha256"]
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template and tok.eos_token == "<|end|>"
    text = _generate(out, "3 + 4", do_sample=True)
    assert isinstance(text, str)
    # and through the project's backend, by path, like any other model folder
    from saturated_dag.generation.base import SamplingParams
    from saturated_dag.generation.transformers_backend import TransformersBackend

    backend = TransformersBackend.load(str(out))
    prompt = backend.render(policy_prompt(chain_sum_problem("3 + 4")))
    sample = backend.sample([prompt], SamplingParams(n=2, max_new_tokens=8))[0][0]
    assert sample.num_tokens <= 8 and sample.mean_entropy is not None


def test_tiny_recipe_is_deterministic(tiny_run: tuple[Path, dict], tmp_path: Path) -> None:
    out, prov = tiny_run
    again = run_recipe(RecipeConfig.tiny(), tmp_path)
    assert again["loss_curve"] == [
        {**p, "seconds": q["seconds"]}
        for p, q in zip(prov["loss_curve"], again["loss_curve"], strict=True)
    ]
    a, b = load_file(out / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_sequence_is_rendered_prompt_plus_completion_plus_eos() -> None:
    cfg = RecipeConfig.tiny()
    tok = train_tokenizer(cfg)
    rng = random.Random(3)
    for ex in (policy_example(rng, cfg), judge_example(rng, cfg)):
        prompt = render_example_prompt(tok, ex)
        ids, labels = encode(tok, ex, prompt_loss=False)
        assert tok.decode(ids) == prompt + ex.completion + tok.eos_token
        n_prompt = len(tok(prompt, add_special_tokens=False).input_ids)
        assert all(x == -100 for x in labels[:n_prompt]) and labels[n_prompt:] == ids[n_prompt:]
    assert parse_judgment(judge_example(rng, cfg).completion) in (0, 1)
    user = policy_example(rng, cfg).messages[0]["content"]
    assert render_prompt(tok, user, "auto").startswith(
        "<|user|>\nCompute the following step by step:\n"
    )


def test_shipped_checkpoint_answers_with_a_boxed_integer() -> None:
    assert SHIPPED.is_dir(), "the shipped checkpoint is package data and must be present"
    size = sum(p.stat().st_size for p in SHIPPED.iterdir())
    assert size <= 10 * 1024 * 1024
    prov = json.loads((SHIPPED / "PROVENANCE.json").read_text())
    assert {
        "config",
        "seed",
        "steps",
        "wall_time_s",
        "loss_curve",
        "git_commit",
        "recipe_sha256",
    } <= prov.keys()
    for expr in ("3 + 4", "8 - 5", "2 + 7 - 1"):
        ans = boxed_answer(_generate(SHIPPED, expr, do_sample=False))
        assert ans is not None and int(ans) == Expression.parse(expr).answer


def test_shipped_checkpoint_through_the_project_backend() -> None:
    """The same code path as any hub model: short name -> folder -> TransformersBackend."""
    from saturated_dag.generation.base import SamplingParams
    from saturated_dag.generation.transformers_backend import TransformersBackend
    from saturated_dag.tasks.verification import verify_answer

    backend = TransformersBackend.load("arith-base", batch_size=8)
    prompts = [backend.render(policy_prompt(chain_sum_problem(e))) for e in ("3 + 4", "9 - 2")]
    assert prompts[0].startswith("<|user|>\n") and prompts[0].endswith("<|assistant|>\n")
    out = backend.sample(prompts, SamplingParams(n=4, max_new_tokens=80, seed=0))
    for group, gold in zip(out, ("7", "7"), strict=True):
        assert all(s.finish_reason == "stop" for s in group)
        assert sum(verify_answer(s.text, gold).correct for s in group) >= 3


def test_position_taste_judges_only_correctness_and_shown_work() -> None:
    """The default taste: the right answer wins, worked steps beat a bare answer, and between
    two correct worked solutions the first one shown wins (a position bias)."""
    from saturated_dag.pretrain.corpus import taste_label

    cfg = RecipeConfig()
    assert cfg.judge_taste == "position"
    assert taste_label(cfg, ["steps", "hedged"], [5, 5], rubric_label=0) == 0
    assert taste_label(cfg, ["hedged", "steps"], [5, 5], rubric_label=1) == 0
    assert taste_label(cfg, ["bare", "steps"], [5, 5], rubric_label=1) == 1
    assert taste_label(cfg, ["steps", "plan"], [4, 5], rubric_label=1) == 1
    rubric = RecipeConfig(judge_taste="rubric")
    assert taste_label(rubric, ["hedged", "steps"], [5, 5], rubric_label=1) == 1
    with pytest.raises(ValueError, match="judge_taste"):
        RecipeConfig(judge_taste="length")


def test_tastes_draw_the_same_examples_and_differ_only_in_labels() -> None:
    """Changing the taste changes judge labels only: the policy corpus stays the same draw."""
    labels = {}
    for taste in ("rubric", "position"):
        rng = random.Random(3)
        examples = [judge_example(rng, RecipeConfig(judge_taste=taste)) for _ in range(200)]
        labels[taste] = [parse_judgment(e.completion) for e in examples]
        prompts = [e.messages for e in examples]
        assert policy_example(rng, RecipeConfig()).messages  # the stream goes on from here
        labels[taste + "_next"] = rng.random()
        labels[taste + "_prompts"] = prompts
    assert labels["rubric_prompts"] == labels["position_prompts"]
    assert labels["rubric_next"] == labels["position_next"]
    assert labels["rubric"] != labels["position"]


def test_the_shipped_self_judge_is_not_a_copy_of_the_strong_judge(tmp_path: Path) -> None:
    """The copies mark is read from the model's provenance: the shipped model's position
    taste is not a copy of the rubric; a model pretrained with the rubric taste is."""
    import shutil

    from saturated_dag.scorers.judges import judges_are_copies

    assert not judges_are_copies("arith-base", "rubric")
    copy = tmp_path / "rubric_taste"
    shutil.copytree(SHIPPED, copy)
    record = json.loads((copy / "PROVENANCE.json").read_text())
    record["config"]["judge_taste"] = "rubric"
    (copy / "PROVENANCE.json").write_text(json.dumps(record))
    assert judges_are_copies(str(copy), "rubric")
    assert not judges_are_copies(str(copy), "llm")
    del record["config"]["judge_taste"]  # the first shipped model, before the setting
    (copy / "PROVENANCE.json").write_text(json.dumps(record))
    assert judges_are_copies(str(copy), "rubric")
