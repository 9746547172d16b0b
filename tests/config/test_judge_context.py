"""The self-judge's context: computed from the profile and the tokenizer when the engine
starts (``max_model_len: auto``), or the profile refused with the numbers."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.config import ProfileError
from saturated_dag.generation.rehearsal_models import build_tokenizer
from saturated_dag.profiles import load_profile
from saturated_dag.profiles.engine_context import (
    MARGIN,
    ContextNeed,
    ContextTooShort,
    judge_need,
    longest_problems,
    policy_needs,
    resolve_context,
)
from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.judges import render_judge_prompt


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def test_paper_profiles_compute_the_policy_context_instead_of_4096() -> None:
    for name in ("paper", "paper_instruct", "rehearsal", "rehearsal_instruct"):
        assert load_profile(name).policy.vllm.max_model_len == "auto", name


def test_a_context_that_cannot_hold_two_completions_and_a_judgment_is_refused_at_load() -> None:
    with pytest.raises(ProfileError, match=r"policy.vllm.max_model_len: 4096 tokens cannot "
                                           r"hold the self-judge's prompt.*need 5120"):
        load_profile("paper", {"policy": {"vllm": {"max_model_len": 4096}}})
    with pytest.raises(ProfileError, match=r"judges.strong.vllm.max_model_len: 5000"):
        load_profile("paper", {"judges": {"strong": {"vllm": {"max_model_len": 5000}}}})


def test_the_need_is_the_rendered_prompt_plus_two_completions_and_a_judgment(tokenizer) -> None:
    profile = load_profile("rehearsal")
    problems = longest_problems(profile, "chain_sum")
    assert len(problems) == 8  # one question per cell of D and D' (4 each)
    need = judge_need(tokenizer, "chain_sum", problems, instruct=False, chat_template="never",
                      completion_tokens=2048, judgment_tokens=1024, what="self-judge")
    direct = max(len(tokenizer(render_judge_prompt(
        tokenizer, judge_messages("chain_sum", p, ["", ""], False), "never"),
        add_special_tokens=False)["input_ids"]) for p in problems)
    assert need.prompt == direct > 500  # the few-shot examples
    assert need.total == direct + 2 * 2048 + 1024 + MARGIN
    # a real pair of 2,048-token completions fits the computed need
    completion = " ".join(["1 + 2 = 3"] * 4000)
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"][:2048]
    text = tokenizer.decode(ids)
    prompt = render_judge_prompt(tokenizer, judge_messages("chain_sum", problems[-1],
                                                           [text, text], False), "never")
    assert len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + 1024 <= need.total


def test_policy_needs_cover_sampling_and_the_self_judge_of_every_task(tokenizer) -> None:
    profile = load_profile("rehearsal")
    needs = policy_needs(profile, tokenizer)
    assert [(n.what, n.task) for n in needs] == [
        ("sampling", "chain_sum"), ("self-judge", "chain_sum"),
        ("sampling", "gsm8k"), ("self-judge", "gsm8k")]
    judge = needs[3]
    assert judge.completions == 2 * profile.sampling.max_new_tokens
    assert judge.generated == profile.scoring.judge_max_new_tokens


def test_auto_takes_the_largest_need_and_a_short_number_is_refused_with_the_numbers() -> None:
    needs = [ContextNeed("sampling", "gsm8k", 300, 0, 2048),
             ContextNeed("self-judge", "gsm8k", 2100, 4096, 1024)]
    largest = 2100 + 4096 + 1024 + MARGIN
    assert resolve_context("auto", needs, "policy.vllm.max_model_len", 32768) == largest
    assert resolve_context(8192, needs, "policy.vllm.max_model_len") == 8192
    assert resolve_context(None, needs, "policy.vllm.max_model_len", 32768) is None
    with pytest.raises(ContextTooShort, match=rf"max_model_len = 4,096 cannot hold {largest:,}"
                                              r"(.|\n)*self-judge on gsm8k: prompt 2,100"):
        resolve_context(4096, needs, "policy.vllm.max_model_len")
    with pytest.raises(ContextTooShort, match=r"model's maximum is 4,096"):
        resolve_context("auto", needs, "policy.vllm.max_model_len", 4096)
    with pytest.raises(ContextTooShort, match=r"the model's maximum cannot hold"):
        resolve_context(None, needs, "policy.vllm.max_model_len", 4096)


def test_the_engine_starts_with_the_computed_context_or_fails_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the policy's vLLM engine is given, read off the real model folder and tokenizer
    (the rehearsal model, built here) before any engine loads."""
    from resources.inference import vllm_options
    from saturated_dag.profiles.engine_context import policy_needs as needs

    monkeypatch.setenv("SATURATED_DAG_CACHE", str(tmp_path))
    profile = load_profile("rehearsal")
    options = vllm_options(profile.policy, lambda tok: needs(profile, tok),
                           "policy.vllm.max_model_len")
    assert isinstance(options["max_model_len"], int) and 1000 < options["max_model_len"] <= 8192
    short = load_profile("rehearsal", {"policy": {"vllm": {"max_model_len": 200}}})
    with pytest.raises(dg.Failure, match=r"policy.vllm.max_model_len = 200 cannot hold"):
        vllm_options(short.policy, lambda tok: needs(short, tok), "policy.vllm.max_model_len")


def test_terms_and_digits_outside_1_99_are_refused_at_load() -> None:
    for grid in ({"terms": [0, 3], "digits": [1, 1]}, {"terms": [3, 100], "digits": [1, 1]},
                 {"terms": [3, 3], "digits": [2, 1]}):
        with pytest.raises(ProfileError, match=r"must be an increasing range within 1-99"):
            load_profile("ci", {"chain_sum": {"grid": grid}})


def test_a_cell_whose_prompt_cannot_fit_the_context_is_refused_at_load_naming_it() -> None:
    """99 terms of 9 digits: about 1,000 prompt tokens and 160 new ones on the embedded
    model's 1,024-token context. Every completion was cut short and read as wrong, silently."""
    from saturated_dag.profiles.engine_context import check_local_policy

    check_local_policy(load_profile("demo"))  # the shipped grids fit
    check_local_policy(load_profile("ci"))
    too_long = load_profile("ci", {"chain_sum": {
        "grid": {"terms": [3, 3], "digits": [1, 1]},
        "strict_grid": {"terms": [99, 99], "digits": [9, 9]}}})
    with pytest.raises(ContextTooShort, match=r"chain_sum grid point 99x9: prompt [\d,]+ \+ "
                                              r"sampling.max_new_tokens 160 = [\d,]+ > the "
                                              r"model's context 1,024"):
        check_local_policy(too_long)


def test_folder_tokenizer_is_what_autotokenizer_loads_without_importing_torch() -> None:
    """The load-time check reads the embedded model's tokenizer without torch (4 s at every
    code-location load); it renders and encodes exactly as ``AutoTokenizer``'s does."""
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from saturated_dag.profiles.engine_context import folder_tokenizer
    from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt, render_prompt

    folder = "saturated_dag/models/arith_base"
    ours, library = folder_tokenizer(folder), AutoTokenizer.from_pretrained(folder)
    prompt = policy_prompt(chain_sum_problem("12 - 7 + 3"))
    assert render_prompt(ours, prompt, "auto") == render_prompt(library, prompt, "auto")
    text = render_prompt(library, prompt, "auto") + "\\boxed{8}"
    assert ours(text)["input_ids"] == library(text)["input_ids"]
    assert ours.eos_token_id == library.eos_token_id
    probe = ("import sys; from saturated_dag.profiles.engine_context import folder_tokenizer; "
             f"folder_tokenizer({folder!r}); print('torch' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert loaded.stdout.strip() == "False"
