"""docs/extending.md's example, run: a scorer added through the registry reaches the graph,
the plan and the results table with no other change to the project."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from saturated_dag.config import ProfileError
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.plan_text import task_plan
from saturated_dag.scorers.registry import Scored, ScorerInputs, ScorerSpec, register, unregister
from saturated_dag.scorers.scored_completions import score_frame
from tests.pipeline import ONE_SFT_ADAPTER, graph, materialize, resources
from tests.scoring_data import make_partitions, make_pool


def shortest(inputs: ScorerInputs) -> Scored:
    """The toy scorer of docs/extending.md: a shorter completion scores higher."""
    rows = inputs.completions.rows
    lengths = rows["completion"].str.len_chars().cast(pl.Float64)
    return Scored(score_frame(rows, "shortest", (-lengths).to_list()),
                  {"longest completion (characters)": int(lengths.max() or 0)})


@pytest.fixture
def shortest_scorer() -> Iterator[ScorerSpec]:
    spec = register(ScorerSpec("shortest", "minus the completion's length in characters.",
                               compute=shortest))
    yield spec
    unregister(spec.name)


OVERRIDES = {**ONE_SFT_ADAPTER, "training": {**ONE_SFT_ADAPTER["training"],
                                             "scorers": ["shortest"], "methods": ["dpo"]}}
"""The smallest graph that reaches an eval report, DPO ranked by the toy scorer."""


def test_an_unregistered_scorer_is_refused_with_the_registered_names() -> None:
    with pytest.raises(ProfileError, match=r"unknown scorer 'shortest'; registered scorers: "
                                           r"entropy, self_judge, strong_judge, random"):
        load_profile("demo", {"training": {"scorers": ["shortest"]}})


def test_a_registered_scorer_reaches_the_graph_the_plan_and_the_table(
        shortest_scorer: ScorerSpec, tmp_path: Path, tiny_model_dir: Path) -> None:
    overrides = {**OVERRIDES, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, checks = graph("demo", overrides)
    keys = {a.key.to_user_string() for a in everything}
    # the graph: its scores, the dataset they rank, the adapter, its eval report
    assert {"chain_sum/shortest_scores", "chain_sum/saturated/dpo_pairs/shortest",
            "chain_sum/saturated/adapter/dpo_shortest",
            "chain_sum/saturated/eval/dpo_shortest"} <= keys
    scores_asset = next(a for a in everything if a.key.to_user_string()
                        == "chain_sum/shortest_scores")
    assert "minus the completion's length" in (scores_asset.descriptions_by_key[
        scores_asset.key] or "")
    # the plan the cost table and the docs read
    (row,) = task_plan(load_profile("demo", overrides), "chain_sum")
    assert (row.label, row.cell) == ("DPO · shortest", "saturated/dpo_shortest")

    store = tmp_path / "out" / "assets"
    pool = make_pool()
    atomic_write_parquet(pool, store / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool),
                         store / "chain_sum" / "difficulty_partitions.parquet")
    wanted = [a.key for a in everything
              if a.key.path[0] == "chain_sum"
              and (a.key.path[1] in ("saturated", "eval", "results_table")
                   or a.key.path[-1] == "shortest_scores")]
    result = materialize([*everything, *checks], selection=wanted,
                            instance=dg.DagsterInstance.ephemeral(),
                            resources=resources(tmp_path / "out", "demo", overrides))
    assert result.success
    (scored,) = result.asset_materializations_for_node("chain_sum__shortest_scores")
    assert scored.metadata["longest completion (characters)"].value > 0
    scores = pl.read_parquet(store / "chain_sum" / "shortest_scores.parquet")
    assert set(scores["scorer"]) == {"shortest"} and scores.height > 0
    table = pl.read_csv(tmp_path / "out" / "chain_sum" / "results_table.csv")
    assert table["method"].to_list() == ["Base model", "DPO"]
    assert table["scorer"][1] == "shortest" and table["Δ pass@1 low"][1] is not None


def test_the_registries_agree_with_the_profile_schema_and_the_trainer() -> None:
    """Methods, tasks and scorers: the profile's allowed names are the registries' (an entry
    added to one and not the other would be refused, or accepted and never built)."""
    from typing import get_args

    from saturated_dag.config import Method, TaskName
    from saturated_dag.data.questions import TASKS
    from saturated_dag.methods import METHODS, label
    from saturated_dag.training.train import METHODS as TRAINER_METHODS

    assert get_args(Method) == tuple(METHODS) == TRAINER_METHODS
    assert get_args(TaskName) == tuple(TASKS)
    from saturated_dag.scorers import builtin, registry

    assert tuple(s.name for s in builtin.registered()) == registry.BUILTIN_NAMES
    assert {m: label(m) for m in METHODS} == {"dpo": "DPO", "rrhf": "σ-RRHF", "sft": "SFT",
                                              "raft": "RAFT"}
