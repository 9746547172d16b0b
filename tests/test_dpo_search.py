"""DPO's recipe search (issue 45): its profile extends the testbed's, its cells are ordinary
cells of the plan, and its analysis reads every recipe's own files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from saturated_dag.analysis import dpo_search
from saturated_dag.config import ProfileError
from saturated_dag.experiments import experiment_plan
from saturated_dag.profiles import load_profile

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first


def test_the_search_profile_is_the_testbed_with_dpo_over_all_its_configurations() -> None:
    """The defaults: the testbed's world (data seeds, questions, thresholds) with DPO alone,
    both cells (oracle, shuffled) over β x NLL weight x η, 4 epochs, no recipes."""
    testbed, search = load_profile("testbed"), load_profile("dpo_search")
    assert search.chain_sum == testbed.chain_sum and search.data_seeds == testbed.data_seeds
    assert search.sampling == testbed.sampling and search.policy == testbed.policy
    assert search.testbed is not None and search.testbed.analysis == "dpo_recipe_search"
    assert search.testbed.dpo_min_effect == testbed.testbed.dpo_min_effect  # type: ignore[union-attr]
    assert search.training.recipes is None and search.training.epochs == 4
    plan = experiment_plan(search)["chain_sum"]
    assert [c.name for c in plan.cells] == ["dpo_oracle", "dpo_oracle_shuffled"]
    assert plan.selections == list(plan.cells)
    for cell in plan.cells:
        assert len(plan.trained[cell]) == 5 * 2 * 4  # β x NLL weight x η
    assert len(plan.adapters) == 2 * 40 * 2  # cells x configurations x data seeds
    names = {a.name for a in plan.adapters}
    assert "dpo_oracle_beta5_nll1_lr0.0003" in names and "dpo_oracle_beta5_lr0.0003" in names


def test_extends_lays_a_profile_over_another_and_refuses_a_circle(tmp_path: Path) -> None:
    child = tmp_path / "child.yaml"
    child.write_text("extends: demo\nname: child\nsampling: {n: 4}\n")
    profile, demo = load_profile(str(child)), load_profile("demo")
    assert profile.name == "child" and profile.sampling.n == 4
    assert profile.sampling.max_new_tokens == demo.sampling.max_new_tokens
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("extends: b.yaml\nname: a\n")
    b.write_text("extends: a.yaml\nname: b\n")
    with pytest.raises(ProfileError, match="runs in a circle"):
        load_profile(str(a))
    (tmp_path / "c.yaml").write_text("extends: nowhere\n")
    with pytest.raises(ProfileError, match="'nowhere' is not one of"):
        load_profile(str(tmp_path / "c.yaml"))


def _validation(rates: list[float], n: int = 8) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"q{i:02d}" for i in range(len(rates))],
                         "n": [n] * len(rates), "correct": [round(r * n) for r in rates]})


def _samples(styles: dict[str, int]) -> pl.DataFrame:
    text = {"steps": "Let's solve the problem step by step:\n1. **Addition:** 1 + 2 = 3\n"
                     "The final answer is: \\boxed{3}",
            "bare": "\\boxed{3}"}
    completions = [text[s] for s, count in styles.items() for _ in range(count)]
    return pl.DataFrame({"question_id": ["q00"] * len(completions), "completion": completions})


def _runs(recipe: tuple[float, float, float], oracle: float, shuffled: float,
          rng: np.random.Generator, margin: float) -> list[dpo_search.SearchRun]:
    base = np.full(40, 0.5)
    runs = []
    for scorer, shift in (("oracle", oracle), ("oracle_shuffled", shuffled)):
        for seed in (0, 1):
            rates = np.clip(base + shift + rng.normal(0, 0.02, 40), 0, 1)
            log = [{"step": 1, "rewards/margins": 0.0, "logps/chosen": -1.0,
                    "logps/rejected": -2.0},
                   {"step": 9, "rewards/margins": margin, "logps/chosen": -0.9,
                    "logps/rejected": -3.0}]
            runs.append(dpo_search.SearchRun(recipe, scorer, seed, 2, log,
                                             _validation(list(rates)),
                                             _samples({"steps": 6, "bare": 2})))
    return runs


def test_a_recipe_passes_only_with_the_oracle_up_and_its_shuffle_at_zero() -> None:
    """Each recipe is read against the base model's validation results, with the shuffled
    control at the same recipe; the rule's choice is marked, and the verdict names the
    recipes that pass."""
    rng = np.random.default_rng(0)
    good, flat = (1.0, 1.0, 1e-4), (0.1, 0.0, 1e-5)
    runs = [*_runs(good, 0.25, 0.0, rng, 2.0), *_runs(flat, 0.0, 0.0, rng, 0.1)]
    base = _validation([0.5] * 40)
    table = dpo_search.search_table(runs, base, _samples({"steps": 4, "bare": 4}), "oracle",
                                    "oracle_shuffled", good, 5.0, 3.0)
    rows = {(r["β"], r["NLL weight"], r["η"]): r for r in table.to_dicts()}
    assert rows[good]["passes"] and not rows[flat]["passes"]
    assert rows[good]["oracle Δ"] == pytest.approx(25, abs=2)
    assert rows[good]["oracle low"] > 0 and rows[flat]["shuffled low"] <= 0
    assert rows[good]["chosen by the rule"] and not rows[flat]["chosen by the rule"]
    assert rows[good]["style shift (TV, points)"] == pytest.approx(25)
    assert rows[good]["chosen log-prob moved"] == pytest.approx(0.1)
    found = dpo_search.verdict(table)
    assert found["passed"] and found["passing"] == ["β=1, η=1e-04, NLL 1"]
    assert found["chosen passes"]
    shuffled_up = [*_runs(good, 0.25, 0.2, rng, 2.0)]  # the shuffle gains too: no control
    table = dpo_search.search_table(shuffled_up, base, None, "oracle", "oracle_shuffled",
                                    None, 5.0, 3.0)
    assert not table["passes"][0] and not dpo_search.verdict(table)["passed"]
    assert "unvalidated in the embedded world" in dpo_search.verdict(table)["reading"]


def test_a_recipe_without_its_shuffled_runs_is_refused() -> None:
    rng = np.random.default_rng(1)
    runs = [r for r in _runs((1.0, 0.0, 1e-4), 0.1, 0.0, rng, 1.0) if r.scorer == "oracle"]
    with pytest.raises(ValueError, match="has no run on oracle_shuffled"):
        dpo_search.search_table(runs, _validation([0.5] * 40), None, "oracle",
                                "oracle_shuffled", None, 5.0, 3.0)
    with pytest.raises(ValueError, match="two runs share a recipe"):
        dpo_search.search_table([*runs, runs[0]], _validation([0.5] * 40), None, "oracle",
                                "oracle_shuffled", None, 5.0, 3.0)


TINY = {
    "chain_sum": {"questions_per_cell": 4, "eval_questions_per_cell": 2,
                  "strict_questions_per_cell": 2},
    "sampling": {"max_new_tokens": 96},
    "training": {"epochs": 1, "validation_questions_per_cell": 1,
                 "selection": {"learning_rates": [3e-4], "dpo_betas": [0.1, 1.0],
                               "dpo_nll_weights": [0.0, 1.0]}},
    "testbed": {"min_training_questions": 1}}
"""The search at toy size: 2 β x 2 NLL weights x 1 η, one epoch."""


def test_a_tiny_search_runs_as_cells_of_the_graph(tmp_path: Path) -> None:
    """The search's graph at toy size: both cells train every recipe, the base model's
    validation is sampled once, and the analysis writes its table, figure and verdicts."""
    import dagster as dg

    from tests.pipeline import ancestors, graph, materialize, resources

    assets, checks = graph("dpo_search", TINY)
    key = dg.AssetKey(["dpo_search", "chain_sum", "dpo_recipe_search"])
    result = materialize([*assets, *checks], [key, *sorted(ancestors(assets, key))],
                         resources=resources(tmp_path / "out", "dpo_search", TINY))
    assert result.success
    out = tmp_path / "out" / "chain_sum"
    table = pl.read_parquet(tmp_path / "out" / "assets" / "chain_sum" /
                            "dpo_recipe_search.parquet")
    assert table.height == 4 and table["chosen by the rule"].sum() == 1
    assert set(table["NLL weight"]) == {0.0, 1.0} and set(table["β"]) == {0.1, 1.0}
    assert table["reward margin (last)"].null_count() == 0
    verdicts = json.loads((out / "dpo_recipe_search.json").read_text())
    assert verdicts["recipes"] == 4 and "diagnosis" in verdicts
    assert (out / "dpo_recipe_search.png").is_file()
    page = result.asset_materializations_for_node("chain_sum__dpo_recipe_search")[0]
    assert next(iter(page.metadata)) == "summary"

