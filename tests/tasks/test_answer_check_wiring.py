"""Issue 13.4: the profile's ``answer_check`` reaches every verification and every cache key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pytest

from saturated_dag.data.pool import generate_pool
from saturated_dag.evaluation.reports import evaluate
from saturated_dag.generation.base import ProgressFn, Sample, SamplingParams
from saturated_dag.tasks.base import Question


class _StatedAnswers:
    """A backend whose completions state the gold without a box: only Math-Verify reads it."""

    name = "stated-answers"
    tokenizer = None

    def __init__(self, golds: dict[str, str]) -> None:
        self.golds = golds

    def render(self, user_text: str) -> str:
        return user_text

    def sample(self, prompts: Sequence[str], params: SamplingParams,
               progress: ProgressFn | None = None) -> list[list[Sample]]:
        return [[Sample(i, j, f"2 + 3 = 5, so the answer is {self.golds[p]}.", [1, 2], "stop")
                 for j in range(params.n)] for i, p in enumerate(prompts)]

    def close(self) -> None:
        pass


QUESTIONS = [Question(f"q{i}", "chain_sum", "D", "2x1", f"{i} + 5", f"p{i}", str(i + 5))
             for i in range(3)]
BACKEND = _StatedAnswers({q.prompt_text: q.gold for q in QUESTIONS})
PARAMS = SamplingParams(n=2, max_new_tokens=8)


@pytest.mark.parametrize(("mode", "correct"), [("math_verify", True), ("last_boxed", False)])
def test_pool_and_evaluate_verify_under_the_given_mode(mode: str, correct: bool) -> None:
    pool = generate_pool(QUESTIONS, BACKEND, PARAMS, answer_check=mode)  # type: ignore[arg-type]
    assert (pool["correct"] == correct).all()
    answers = pool["answer"].unique(maintain_order=True).to_list()
    assert answers == (["5", "6", "7"] if correct else [None])
    table, summary = evaluate(QUESTIONS, BACKEND, PARAMS, answer_check=mode)  # type: ignore[arg-type]
    assert (table["correct"] == (2 if correct else 0)).all()
    assert summary["pass@1"] == (100.0 if correct else 0.0)


def test_the_paper_rule_is_the_default() -> None:
    pool = generate_pool(QUESTIONS, BACKEND, PARAMS)
    assert pool["correct"].all()
    _, summary = evaluate(QUESTIONS, BACKEND, PARAMS)
    assert summary["pass@1"] == 100.0


def test_stored_shards_checked_under_another_rule_are_not_reused(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    from tests.pipeline import by_name, graph, resources

    overrides = {"chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]},
                               "questions_per_cell": 2, "eval_questions_per_cell": 2,
                               "strict_grid": None},
                 "sampling": {"n": 2, "max_new_tokens": 6}, "stages": {"shard_questions": 2},
                 "policy": {"model": str(tiny_model_dir), "batch_size": 8}}

    def run(mode: str) -> dict[str, dict]:
        settings = {**overrides, "answer_check": mode}
        assets = by_name(graph("demo", settings)[0], "chain_sum", "generation_pool", "base")
        result = dg.materialize(assets, resources=resources(tmp_path / "out", "demo", settings))
        return {node: {k: v.value for k, v in
                       result.asset_materializations_for_node(node)[0].metadata.items()}
                for node in ("chain_sum__generation_pool", "chain_sum__eval__base")}

    boxed = run("last_boxed")
    paper = run("math_verify")
    again = run("math_verify")
    for node in boxed:
        assert paper[node]["cache"] == "miss" and paper[node]["shards_reused"] == 0, node
        assert paper[node]["cache_key"] != boxed[node]["cache_key"]
        assert again[node]["cache"] == "hit"
        assert boxed[node]["answer_check"] == "last_boxed"
        assert paper[node]["answer_check"] == "math_verify"
