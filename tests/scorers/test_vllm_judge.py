"""The LLM judge on a real vLLM engine: free analyses stopped at the first valid judgment,
forced indices otherwise, no parse failures."""

from collections.abc import Iterator

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; build its env with "
                    "`bash .ci/vllm_env.sh`")

from saturated_dag.generation.vllm_backend import VllmBackend
from saturated_dag.scorers.judges import JudgeRequest, LlmJudge, judgment_stops
from saturated_dag.tasks.prompts import chain_sum_problem
from tests.generation.test_vllm_backend import build_vllm_tiny_model, open_tiny_engine
from tests.scorers.test_tournament import (
    JOHN_CASES,
    JOHN_SCRIPT,
    JOHN_VERDICT,
    build_scripted_model,
    john_request,
)


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmJudge]:
    folder = build_vllm_tiny_model(tmp_path_factory.mktemp("vllm_judge") / "model",
                                   max_positions=2048)
    backend = open_tiny_engine(folder, seed=7, max_model_len=1024)
    yield LlmJudge(backend, instruct=True, max_new_tokens=24, name="self_judge")
    backend.close()


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmBackend]:
    """An engine on the model whose greedy output is ``JOHN_SCRIPT``."""
    folder = build_scripted_model(tmp_path_factory.mktemp("vllm_scripted") / "model")
    backend = open_tiny_engine(folder, seed=7, max_model_len=1024)
    yield backend
    backend.close()


def test_every_comparison_gets_a_verdict_in_range(judge: LlmJudge) -> None:
    requests = [JudgeRequest("chain_sum", chain_sum_problem(f"{a} + {b}"),
                             (f"{a} + {b} = {a + b}\n\\boxed{{{a + b}}}", f"\\boxed{{{a + b}}}"))
                for a, b in [(1, 2), (3, 4), (5, 6)]]
    verdicts = judge.judge(requests)
    assert len(verdicts) == 3
    assert all(v.choice in (0, 1) for v in verdicts)  # stopped or forced, never missing
    assert all("Judgment: [" in v.text for v in verdicts)


def test_greedy_until_stops_after_the_completing_token(scripted: VllmBackend) -> None:
    """The stop string is kept, nothing after it, and no EOS is added to the token ids."""
    (sample,) = scripted.greedy_until([scripted.render("any question")], judgment_stops(1), 32)
    assert sample.text == JOHN_VERDICT and sample.finish_reason == "stop"
    closing = scripted.tokenizer.convert_tokens_to_ids(JOHN_SCRIPT[11])
    assert sample.token_ids[-1] == closing and len(sample.token_ids) == 12


@pytest.mark.parametrize(("budget", "choice", "forced", "text"), JOHN_CASES,
                         ids=["stops", "forced"])
def test_analysis_passes_unchanged(scripted: VllmBackend, budget: int, choice: int,
                                   forced: bool, text: str) -> None:
    """"John", "**Judge**" and an out-of-range ``Judgment: [2]`` stay in the verdict text as
    the model wrote them: the same verdicts as the transformers route on the same model."""
    judge = LlmJudge(scripted, instruct=True, max_new_tokens=budget)
    verdicts = judge.judge([john_request(), john_request()])
    assert [(v.choice, v.forced, v.text) for v in verdicts] == [(choice, forced, text)] * 2
