"""The LLM judge on a real vLLM engine: regex-constrained verdicts, no parse failures."""

from collections.abc import Iterator

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; build its env with "
                    "`bash .ci/vllm_env.sh`")

from saturated_dag.scorers.judges import JudgeRequest, LlmJudge
from saturated_dag.tasks.prompts import chain_sum_problem
from tests.test_vllm_backend import build_vllm_tiny_model, open_tiny_engine


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmJudge]:
    folder = build_vllm_tiny_model(tmp_path_factory.mktemp("vllm_judge") / "model",
                                   max_positions=2048)
    backend = open_tiny_engine(folder, seed=7, max_model_len=1024)
    yield LlmJudge(backend, instruct=True, max_new_tokens=24, name="self_judge")
    backend.close()


def test_every_comparison_gets_a_verdict_in_range(judge: LlmJudge) -> None:
    requests = [JudgeRequest("chain_sum", chain_sum_problem(f"{a} + {b}"),
                             (f"{a} + {b} = {a + b}\n\\boxed{{{a + b}}}", f"\\boxed{{{a + b}}}"))
                for a, b in [(1, 2), (3, 4), (5, 6)]]
    verdicts = judge.judge(requests)
    assert len(verdicts) == 3
    assert all(v.choice in (0, 1) for v in verdicts)  # constrained or forced, never missing
    assert all("Judgment: [" in v.text for v in verdicts)
