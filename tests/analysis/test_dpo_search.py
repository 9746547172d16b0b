"""DPO's recipe search (issue 45): its profile extends the testbed's, its cells are ordinary
cells of the plan, and its analysis reads every recipe's own files."""

from __future__ import annotations

import json
from dataclasses import replace
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


def _runs(recipe: tuple[str, float, float, float], oracle: float, shuffled: float,
          rng: np.random.Generator, margin: float, cells: tuple[str, str] = (
              "oracle", "oracle_shuffled")) -> list[dpo_search.SearchRun]:
    base = np.full(40, 0.5)
    runs = []
    for scorer, shift in zip(cells, (oracle, shuffled), strict=True):
        for seed in (0, 1):
            rates = np.clip(base + shift + rng.normal(0, 0.02, 40), 0, 1)
            log = [{"step": 1, "rewards/margins": 0.0, "logps/chosen": -1.0,
                    "logps/rejected": -2.0, "rewards/chosen": 0.0, "rewards/rejected": 0.0},
                   {"step": 9, "rewards/margins": margin, "logps/chosen": -0.9,
                    "logps/rejected": -3.0, "rewards/chosen": 0.1 * recipe[1],
                    "rewards/rejected": -0.1 * recipe[1] - margin}]
            runs.append(dpo_search.SearchRun(recipe, scorer, seed, 2, log,
                                             _validation(list(rates)),
                                             _samples({"steps": 6, "bare": 2})))
    return runs


PLANTED = dpo_search.Signal("planted", "oracle", "oracle_shuffled", "base", 5.0)
CORRECTNESS = dpo_search.Signal("correctness", "random", "shuffled", "contrast", 3.0)


def test_a_recipe_passes_only_with_the_oracle_up_and_its_shuffle_at_zero() -> None:
    """Each recipe is read against the base model's validation results, with the shuffled
    control at the same recipe; the rule's choice is marked, and the verdict names the
    recipes that pass, per loss."""
    rng = np.random.default_rng(0)
    good, flat = ("sigmoid", 1.0, 1.0, 1e-4), ("sigmoid", 0.1, 0.0, 1e-5)
    runs = [*_runs(good, 0.25, 0.0, rng, 2.0), *_runs(flat, 0.0, 0.0, rng, 0.1)]
    base = _validation([0.5] * 40)
    table = dpo_search.search_table(runs, base, _samples({"steps": 4, "bare": 4}), [PLANTED],
                                    {"planted": good}, 3.0)
    rows = {(r["DPO loss"], r["β"], r["NLL weight"], r["η"]): r for r in table.to_dicts()}
    assert rows[good]["passes"] and not rows[flat]["passes"]
    assert rows[good]["signal Δ"] == pytest.approx(25, abs=2)
    assert rows[good]["contrast Δ"] == pytest.approx(25, abs=2)
    assert rows[good]["signal low"] > 0 and rows[flat]["shuffled low"] <= 0
    assert rows[good]["chosen by the rule"] and not rows[flat]["chosen by the rule"]
    assert rows[good]["style shift (TV, points)"] == pytest.approx(25)
    assert rows[good]["chosen log-prob moved"] == pytest.approx(0.1)
    # TRL logs β x the log-ratio: the table holds the ratio itself
    assert rows[good]["chosen log-ratio (last)"] == pytest.approx(0.1)
    assert rows[good]["rejected log-ratio (last)"] == pytest.approx(-0.1 - 2.0)
    found = dpo_search.verdict(table)
    planted = found["signals"]["planted"]
    assert planted["passed"] and planted["passing"] == ["β=1, η=1e-04, NLL 1"]
    assert planted["chosen passes"] and found["cause"] == "a loss learns the planted signal"
    shuffled_up = [*_runs(good, 0.25, 0.2, rng, 2.0)]  # the shuffle gains too: no control
    table = dpo_search.search_table(shuffled_up, base, None, [PLANTED], {}, 3.0)
    assert not table["passes"][0] and not dpo_search.verdict(table)["signals"]["planted"][
        "passed"]
    assert "unvalidated on saturated pairs" in dpo_search.verdict(table)["reading"]


def test_the_verdict_names_the_cause_from_both_signals_per_loss() -> None:
    """Correctness passes on its contrast with its shuffle; the planted signal at no loss:
    "DPO learns correctness, not the planted signal". Neither: "DPO learns neither". A loss
    that learns the planted signal is named with its recipe."""
    rng = np.random.default_rng(2)
    base = _validation([0.5] * 40)
    paper, apo = ("sigmoid", 5.0, 0.0, 1e-4), ("apo_zero", 5.0, 0.0, 1e-4)
    flat_planted = [*_runs(paper, 0.0, 0.0, rng, 1.0), *_runs(apo, 0.01, 0.0, rng, 1.0)]
    # random pairs at the base model, swapped pairs 12.5 points below it (the validation
    # counts are eighths): the contrast passes though the random pairs alone gain nothing
    learned = _runs(paper, 0.0, -0.125, rng, 3.0, cells=("random", "shuffled"))
    table = dpo_search.search_table([*flat_planted, *learned], base, None,
                                    [PLANTED, CORRECTNESS], {"planted": paper}, 3.0)
    assert list(dict.fromkeys(table["signal"])) == ["planted", "correctness"]
    correct = table.filter(pl.col("signal") == "correctness").row(0, named=True)
    assert correct["passes"] and correct["contrast Δ"] == pytest.approx(12.5, abs=2)
    found = dpo_search.verdict(table)
    assert found["cause"] == "DPO learns correctness, not the planted signal"
    assert set(found["signals"]["planted"]["by loss"]) == {
        "plain DPO (the paper's)", "DPO with the apo_zero loss"}
    flat = _runs(paper, 0.0, 0.0, rng, 3.0, cells=("random", "shuffled"))
    table = dpo_search.search_table([*flat_planted, *flat], base, None,
                                    [PLANTED, CORRECTNESS], {}, 3.0)
    assert dpo_search.verdict(table)["cause"] == "DPO learns neither"
    # SFT on the same hard questions is the reference: does the data teach any method?
    sft_flat = [r for r in _runs(("sigmoid", 0.1, 0.0, 1e-4), 0.0, 0.0, rng, 0.0,
                                 cells=("sft", "unused")) if r.scorer == "sft"]
    sft_up = [r for r in _runs(("sigmoid", 0.1, 0.0, 3e-4), 0.125, 0.0, rng, 0.0,
                               cells=("sft", "unused")) if r.scorer == "sft"]
    rows = dpo_search.reference_deltas(CORRECTNESS, [*sft_flat, *sft_up], base)
    assert [r["η"] for r in rows] == [1e-4, 3e-4]
    assert [r["reaches the bar"] for r in rows] == [False, True]
    found = dpo_search.verdict(table, {"correctness": rows})
    assert found["cause"] == "DPO fails where SFT learns"
    assert found["signals"]["correctness"]["SFT reference"]["best"]["η"] == 3e-4
    found = dpo_search.verdict(table, {"correctness": dpo_search.reference_deltas(
        CORRECTNESS, sft_flat, base)})
    assert found["cause"] == "the correctness data teaches no method"
    assert "cannot show whether DPO itself works" in found["reading"]
    apo_learns = [*_runs(paper, 0.0, 0.0, rng, 1.0), *_runs(apo, 0.2, 0.0, rng, 1.0)]
    table = dpo_search.search_table([*apo_learns, *learned], base, None,
                                    [PLANTED, CORRECTNESS], {}, 3.0)
    found = dpo_search.verdict(table)
    assert found["cause"] == "a loss learns the planted signal"
    assert "DPO with the apo_zero loss at β=5, η=1e-04" in found["reading"]


def test_the_planted_signal_is_read_on_its_own_questions() -> None:
    """A signal's ``questions`` restrict every Δ to them (the cells whose styles differ): an
    effect on those questions alone is not diluted by the others."""
    rng = np.random.default_rng(3)
    recipe = ("sigmoid", 5.0, 0.0, 1e-4)
    runs = _runs(recipe, 0.0, 0.0, rng, 1.0)
    lifted = [replace(r, validation=r.validation.with_columns(
        correct=pl.when(pl.col("question_id") < "q20").then(pl.col("n"))
        .otherwise(pl.col("correct")))) if r.scorer == "oracle" else r for r in runs]
    base = _validation([0.5] * 40)
    half = replace(PLANTED, questions=tuple(f"q{i:02d}" for i in range(20)))
    every = dpo_search.search_table(lifted, base, None, [PLANTED], {}, 3.0)
    own = dpo_search.search_table(lifted, base, None, [half], {}, 3.0)
    assert own["signal Δ"][0] == pytest.approx(2 * every["signal Δ"][0], rel=0.1)
    with pytest.raises(ValueError, match="no validation result"):
        dpo_search.search_table(lifted, base, None, [replace(PLANTED, questions=("q99",))],
                                {}, 3.0)


def test_a_recipe_without_its_shuffled_runs_is_refused() -> None:
    rng = np.random.default_rng(1)
    runs = [r for r in _runs(("sigmoid", 1.0, 0.0, 1e-4), 0.1, 0.0, rng, 1.0)
            if r.scorer == "oracle"]
    with pytest.raises(ValueError, match="has no run on oracle_shuffled"):
        dpo_search.search_table(runs, _validation([0.5] * 40), None, [PLANTED], {}, 3.0)
    with pytest.raises(ValueError, match="two runs share a recipe"):
        dpo_search.search_table([*runs, runs[0]], _validation([0.5] * 40), None, [PLANTED],
                                {}, 3.0)


TINY = {
    "chain_sum": {"grid": {"terms": [3, 4], "digits": [1, 1]}, "questions_per_cell": 6,
                  "eval_questions_per_cell": 1, "strict_questions_per_cell": 2},
    "partitions": {"hard_max_pass": 0.75},  # hard questions with a correct completion at toy size
    "sampling": {"max_new_tokens": 96},
    "training": {"epochs": 1, "validation_questions_per_cell": 2,
                 "selection": {"learning_rates": [3e-4], "dpo_betas": [0.1, 1.0],
                               "dpo_loss_types": ["sigmoid", "apo_zero"]}},
    "testbed": {"min_training_questions": {"saturated": 1, "strict_saturated": 1, "hard": 1},
                "positive_min_effect": 1.0}}
"""The diagnosis at toy size: both signals, 2 losses x 2 β x 1 η (correctness: 2 β), one
epoch."""


def test_the_diagnosis_profile_is_the_study_with_dpo_on_both_signals_at_every_loss() -> None:
    """The defaults: the study's world (pool, data seeds, eval set) with DPO and its SFT
    references alone, the planted signal's two cells over loss x β x η and correctness's two
    over β x η at the paper's loss; no self-judge pairs; training sets guarded at 250
    questions per draw for both signals."""
    study, diagnosis = load_profile("study"), load_profile("dpo_diagnosis")
    assert diagnosis.chain_sum == study.chain_sum and diagnosis.data_seeds == 2
    assert diagnosis.sampling == study.sampling and diagnosis.policy == study.policy
    s = diagnosis.testbed
    assert s is not None and s.analysis == "dpo_recipe_search"
    assert s.minimums()["saturated"] >= 250 and s.minimums()["hard"] >= 250
    assert diagnosis.training.dpo_loss_type == "sigmoid"  # the paper's, outside the grid
    plan = experiment_plan(diagnosis)["chain_sum"]
    assert [(c.split, c.name) for c in plan.cells] == [
        ("saturated", "dpo_oracle"), ("saturated", "dpo_oracle_shuffled"),
        ("saturated", "sft"), ("hard", "dpo_correctness_random_loss-sigmoid"),
        ("hard", "dpo_correctness_shuffled_loss-sigmoid"), ("hard", "sft")]
    losses = diagnosis.training.selection.dpo_loss_types
    assert losses is not None and losses[0] == "sigmoid" and len(losses) == 6
    for cell in plan.cells[:2]:
        assert len(plan.trained[cell]) == len(losses) * 2 * 2  # loss x β x η
    for cell in plan.cells[3:5]:
        assert len(plan.trained[cell]) == 2 * 2  # β x η, the paper's loss
        assert {a.training(diagnosis.training).dpo_loss_type
                for a in plan.trained[cell]} == {"sigmoid"}
    for cell in (plan.cells[2], plan.cells[5]):  # SFT, the reference: η alone
        assert len(plan.trained[cell]) == 2
    assert len(plan.adapters) == (2 * len(losses) * 4 + 2 * 4 + 2 * 2) * 2  # x data seeds
    assert "loss-apo_zero_beta5_lr0.0001_data1_seed0" in plan.partitions[plan.cells[0]]
    assert "beta5_lr0.0001_data1_seed0" in plan.partitions[plan.cells[3]]


def test_a_tiny_diagnosis_runs_as_cells_of_the_graph(tmp_path: Path) -> None:
    """The diagnosis's graph at toy size: the four cells train every recipe at each loss, the
    base model's validation is sampled once, and the analysis writes per signal and loss its
    table, figure and verdicts, with the training sets' sizes."""
    import dagster as dg

    from tests.pipeline import ancestors, graph, materialize, resources

    assets, checks = graph("dpo_diagnosis", TINY)
    key = dg.AssetKey(["dpo_diagnosis", "chain_sum", "dpo_recipe_search"])
    result = materialize([*assets, *checks], [key, *sorted(ancestors(assets, key))],
                         resources=resources(tmp_path / "out", "dpo_diagnosis", TINY))
    assert result.success
    out = tmp_path / "out" / "chain_sum"
    table = pl.read_parquet(tmp_path / "out" / "assets" / "chain_sum" /
                            "dpo_recipe_search.parquet")
    assert table.height == 4 + 2 and table["chosen by the rule"].sum() == 2  # one per signal
    assert set(table["signal"]) == {"planted", "correctness"}
    assert set(table["DPO loss"]) == {"sigmoid", "apo_zero"}
    assert table["reward margin (last)"].null_count() == 0
    assert table["chosen log-ratio (last)"].null_count() == 0
    verdicts = json.loads((out / "dpo_recipe_search.json").read_text())
    assert set(verdicts["signals"]) == {"planted", "correctness"} and "cause" in verdicts
    assert set(verdicts["signals"]["planted"]["by loss"]) == {
        "plain DPO (the paper's)", "DPO with the apo_zero loss"}
    assert set(verdicts["signals"]["correctness"]["by loss"]) == {"plain DPO (the paper's)"}
    for signal in ("planted", "correctness"):  # SFT on the same training questions
        assert len(verdicts["signals"][signal]["SFT reference"]["by η"]) == 1
    assert set(verdicts["training questions"]) == {
        f"{s} (data seed {d})" for s in ("saturated", "strict_saturated", "hard")
        for d in (0, 1)}
    assert (out / "dpo_recipe_search.png").is_file()
    page = result.asset_materializations_for_node("chain_sum__dpo_recipe_search")[0]
    assert next(iter(page.metadata)) == "summary"
    assert "verdicts by loss" in page.metadata
