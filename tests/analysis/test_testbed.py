"""The calibrated testbed: known-answer scorers (oracle, shuffled control, reliability dial) and
the controls' verdicts (docs/testbed.md)."""

import json
import random

import numpy as np
import polars as pl
import pytest

from saturated_dag.analysis import testbed
from saturated_dag.config import TestbedSettings as Settings
from saturated_dag.evaluation.statistics import Interval
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from saturated_dag.reporting.labels import sweep_row_label
from saturated_dag.scorers import agreement
from saturated_dag.scorers import oracle as known
from saturated_dag.scorers.scored_completions import ScoredCompletions
from saturated_dag.tasks.solution_styles import (
    STYLES,
    detect_style,
    render_solution,
    sample_expression,
)
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy  # a minute or more in all: collected first

ACCURACY = {"steps": 0.92, "plan": 0.90, "hedged": 0.70, "bare": 0.15}


def synthetic_selection(questions: int = 300, per_question: int = 8, seed: int = 0,
                        wrong_share: float = 0.0) -> ScoredCompletions:
    """Groups of chain-sum completions in random styles, as a pool's saturated (or, with
    ``wrong_share``, hard) questions give them: ties within a style, as on the real pool."""
    rng = random.Random(seed)
    rows = []
    for q in range(questions):
        expr = sample_expression(rng, rng.choice([3, 4, 5]), 1)
        for i in range(per_question):
            style = rng.choice(STYLES)
            wrong = rng.random() < wrong_share
            partials = expr.partials()
            if wrong:
                partials = [*partials[:-1], partials[-1] + 1]
            rows.append({"question_id": f"q{q:04d}", "sample_index": i, "split": "saturated",
                         "correct": not wrong, "problem": expr.text,
                         "completion": render_solution(expr, style, partials)})
    return ScoredCompletions(pl.DataFrame(rows), {})


def _measured(scores: dict[str, pl.DataFrame], a: str, b: str) -> float:
    """Mean within-question ρ as the scorer agreement table computes it."""
    per_question = agreement.per_question_rho({a: scores[a], b: scores[b]}, correct_only=True)
    summary = agreement.summarize(per_question, [a, b], ["saturated"])
    return float(summary["mean_rho"][0])


@pytest.mark.parametrize("seed", [0, 1])
def test_each_dial_scorer_hits_its_target_agreement_in_the_agreement_table(seed):
    selection = synthetic_selection(seed=seed)
    out = known.known_answer_scores(selection, ACCURACY, seed=seed)
    tables = {name: table for name, (table, _facts) in out.items()}
    for name, target in known.DIAL.items():
        measured = _measured(tables, "oracle", name) if name != "oracle" else 1.0
        assert abs(measured - target) <= 0.05, (name, measured, target)
        assert abs(out[name][1]["achieved_rho"] - measured) < 1e-3 or name == "oracle"
    # more noise, less agreement: the dial is monotone
    rhos = [out[name][1]["achieved_rho"] for name in known.DIAL]
    assert rhos == sorted(rhos, reverse=True)


def test_dial_weight_calibrated_on_one_draw_holds_on_another():
    """The mixture is a property of the noise level, not a fit to one set of questions: the
    weight found on one draw gives about the same agreement on a fresh draw."""
    first = known.oracle_scores(synthetic_selection(seed=3), ACCURACY)
    _table, weight, _achieved = known.dial_scores(first, 0.5, "oracle_rho50", seed=3)
    second = known.oracle_scores(synthetic_selection(seed=4), ACCURACY)
    values = second["score"].to_numpy()
    groups = known._groups(second)
    z, noise = np.zeros_like(values), np.zeros_like(values)
    rng = np.random.default_rng(9)
    for index in groups:
        z[index] = known._standardised(values[index])
        noise[index] = rng.standard_normal(len(index))
    assert abs(known.mean_rho(values, known._mixture(z, noise, weight), groups) - 0.5) <= 0.05


def test_oracle_ranks_correct_first_then_the_more_accurate_style():
    selection = synthetic_selection(questions=40, wrong_share=0.3, seed=5)
    scores = known.oracle_scores(selection, ACCURACY).join(
        selection.rows.select("question_id", "sample_index", "completion"),
        on=["question_id", "sample_index"])
    for (_qid,), group in scores.group_by("question_id"):
        ranked = group.sort("score", descending=True)
        correct = ranked["correct"].to_list()
        assert correct == sorted(correct, reverse=True)  # every correct one above every wrong one
        for flag in (True, False):
            part = ranked.filter(pl.col("correct") == flag)
            accuracies = [ACCURACY[detect_style(c)] for c in part["completion"]]
            assert accuracies == sorted(accuracies, reverse=True)
    one = scores.filter(pl.col("correct")).row(0, named=True)
    assert one["score"] == pytest.approx(2 + ACCURACY[detect_style(one["completion"])])


def test_style_accuracy_is_measured_on_the_whole_pool():
    pool = pl.DataFrame({"completion": ["\\boxed{3}", "\\boxed{4}",
                                        render_solution(sample_expression(random.Random(0), 3, 1),
                                                        "steps")],
                         "correct": [True, False, True]})
    assert known.style_accuracy(pool) == {"bare": 0.5, "steps": 1.0}


def test_shuffled_control_keeps_each_questions_score_multiset_and_loses_the_signal():
    selection = synthetic_selection(questions=200, seed=6)
    oracle = known.oracle_scores(selection, ACCURACY)
    shuffled = known.shuffled_scores(oracle, seed=0)
    assert shuffled["scorer"].unique().to_list() == [known.SHUFFLED]
    for (qid,), group in oracle.group_by("question_id"):
        other = shuffled.filter(pl.col("question_id") == qid)
        assert sorted(group["score"].to_list()) == sorted(other["score"].to_list())
    assert abs(_measured({"oracle": oracle, known.SHUFFLED: shuffled}, "oracle",
                         known.SHUFFLED)) < 0.1
    again = known.shuffled_scores(oracle, seed=0)
    assert again.equals(shuffled)  # seeded


def test_dial_refuses_a_target_outside_0_1():
    oracle = known.oracle_scores(synthetic_selection(questions=5), ACCURACY)
    with pytest.raises(ValueError, match="target ρ must be in"):
        known.dial_scores(oracle, 1.5, "oracle_rho150")


def _interval(estimate, low, high):
    return Interval(estimate, low, high, 4, 300)


def _passing_rows(method: str) -> dict[tuple[str, str], Interval]:
    """A method whose controls all pass: the oracle +12, shuffled +0.5 [−1.5, +2.5], and a
    dial that falls with ρ."""
    rows = {(method, "oracle"): _interval(12.0, 9.0, 15.0),
            (method, known.SHUFFLED): _interval(0.5, -1.5, 2.5)}
    for name, value in zip(known.DIAL, [12.0, 8.0, 5.0, 2.0, 0.5], strict=True):
        rows.setdefault((method, name), _interval(value, value - 2, value + 2))
    return rows


POS_RRHF, NEG_RRHF = "positive control (σ-RRHF)", "negative control (σ-RRHF)"
POS_DPO, NEG_DPO = "positive control (DPO)", "negative control (DPO)"


def test_verdicts_read_the_controls_off_their_intervals():
    s = Settings()
    intervals = _passing_rows("rrhf")
    v = testbed._verdicts(s, intervals)
    assert v[POS_RRHF]["passed"] and v[NEG_RRHF]["passed"]
    assert v["dose-response (σ-RRHF)"]["spearman"] == pytest.approx(1.0)
    # a positive control below the threshold, or with its interval touching 0, fails
    intervals[("rrhf", "oracle")] = _interval(7.0, 4.0, 10.0)
    assert not testbed._verdicts(s, intervals)[POS_RRHF]["passed"]
    intervals[("rrhf", "oracle")] = _interval(9.0, -0.5, 18.0)
    assert not testbed._verdicts(s, intervals)[POS_RRHF]["passed"]
    # a shuffled control whose interval reaches past the null band fails, as does one that
    # excludes 0
    intervals[("rrhf", known.SHUFFLED)] = _interval(0.5, -3.5, 4.0)
    assert not testbed._verdicts(s, intervals)[NEG_RRHF]["passed"]
    intervals[("rrhf", known.SHUFFLED)] = _interval(2.0, 0.5, 2.9)
    assert not testbed._verdicts(s, intervals)[NEG_RRHF]["passed"]


def test_each_methods_control_verdicts_are_computed_from_its_own_rows():
    """σ-RRHF's passing rows license nothing about DPO: DPO's verdicts read DPO's rows alone,
    and changing σ-RRHF's rows leaves them as they were."""
    s = Settings()
    dpo_flat = {("dpo", name): _interval(-0.4, -1.4, 0.6) for name in (*known.DIAL,
                                                                         known.SHUFFLED)}
    v = testbed._verdicts(s, {**_passing_rows("rrhf"), **dpo_flat})
    assert v[POS_RRHF]["passed"] and not v[POS_DPO]["passed"]
    assert v[NEG_DPO]["passed"]  # DPO's shuffled rows are flat, as a null should be
    found = testbed.controls(v)
    assert found["rrhf"].passed and not found["dpo"].passed
    failing_rrhf = {key: _interval(-5.0, -8.0, -2.0) for key in _passing_rows("rrhf")}
    again = testbed._verdicts(s, {**failing_rrhf, **dpo_flat})
    assert {k: again[k] for k in (POS_DPO, NEG_DPO)} == {k: v[k] for k in (POS_DPO, NEG_DPO)}
    assert not again[POS_RRHF]["passed"]
    # DPO's own threshold (5 points), not σ-RRHF's 8
    v = testbed._verdicts(s, {**dpo_flat, ("dpo", "oracle"): _interval(6.0, 3.0, 9.0)})
    assert v[POS_DPO]["passed"] and testbed.controls(v)["dpo"].passed
    assert "rrhf" not in testbed.controls(v)  # no σ-RRHF rows: no σ-RRHF control


def test_sfts_control_is_the_oracles_best_against_a_random_correct_completion():
    s = Settings()
    v = testbed._verdicts(s, {}, sft_contrast=_interval(4.0, 1.0, 7.0))
    assert v["positive control (SFT)"]["passed"]
    found = testbed.controls(v)
    assert found["sft"].passed and found["raft"].passed  # RAFT is the controls' own trainer
    v = testbed._verdicts(s, {}, sft_contrast=_interval(1.0, -1.0, 3.0))
    assert not testbed.controls(v)["sft"].passed
    assert testbed.role_of("raft", "oracle").startswith("SFT positive control")
    assert testbed.role_of("raft", "random").startswith("SFT reference")


def test_the_hard_splits_dpo_is_read_against_its_own_known_signal():
    """The hard split's DPO control: random correct-vs-incorrect pairs against the same pairs
    half swapped (``hard_min_effect``, 3 points by default, interval above 0), its negative
    arm within the null band; it licenses the hard split's DPO rows, and the oracle's DPO
    control licenses only the other splits' (``findings.control_key``)."""
    from saturated_dag.analysis.findings import Comparison, Result, control_key, null_reading

    s = Settings()
    hard = {"contrast": _interval(4.0, 1.5, 6.5), "shuffled": _interval(-0.5, -2.0, 1.0)}
    flat_dpo = {("dpo", "oracle"): _interval(0.3, -1.0, 1.6)}
    v = testbed._verdicts(s, flat_dpo, hard=hard)
    assert v["positive control (DPO, hard split)"]["passed"]
    assert v["negative control (DPO, hard split)"]["passed"]
    found = testbed.controls(v)
    assert found["hard/dpo"].passed and not found["dpo"].passed
    assert control_key("hard/dpo_correctness_self_judge") == "hard/dpo"
    assert control_key("saturated/dpo_self_judge") == "dpo"
    assert control_key("hard/rrhf_self_judge") == "rrhf" and control_key("base") is None
    null = Result(Comparison("self-judge pairs beat random pairs", "Table 7",
                             "hard/dpo_correctness_self_judge", "hard/dpo_correctness_random",
                             "greater"), _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(null, found) == "no effect larger than 1.3 points"
    saturated = Result(Comparison("x", "Table 1", "saturated/dpo_self_judge", "base",
                                  "greater"), _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(saturated, found).startswith("unreadable: DPO positive control")
    # below the default 3 points, or touching 0: the hard split's nulls are unreadable
    for contrast in (_interval(2.5, 0.5, 4.5), _interval(3.5, -0.2, 7.0)):
        v = testbed._verdicts(s, flat_dpo, hard={**hard, "contrast": contrast})
        assert null_reading(null, testbed.controls(v)).startswith(
            "unreadable: DPO known-signal control on the hard split")
    # a run without the shuffled pairs has no control for the hard split's DPO
    v = testbed._verdicts(s, {("dpo", "oracle"): _interval(6.0, 3.0, 9.0)})
    assert null_reading(null, testbed.controls(v)) == (
        "unreadable: no positive control of DPO on the hard split in this run")
    note = testbed.unvalidated_note(testbed._verdicts(
        s, {("dpo", "oracle"): _interval(6.0, 3.0, 9.0)},
        hard={**hard, "contrast": _interval(0.0, -2.0, 2.0)}), {"DPO"})
    assert note.strip().startswith("DPO on the hard split is unvalidated")


def _eval_report(accuracy: dict[str, float], cells: dict[str, str],
                 samples: int = 20) -> pl.DataFrame:
    """An eval report (one row per sample) in which question q is right on about
    ``accuracy[q]`` of its samples (deterministic)."""
    return pl.DataFrame([{"question_id": q, "cell": cells[q], "sample_index": i,
                          "correct": i < round(share * samples)}
                         for q, share in accuracy.items() for i in range(samples)])


def test_the_hard_control_rows_are_read_on_every_eval_question():
    """``analyse`` puts the hard split's two DPO cells in the table beside the saturated
    split's rows, each against the base model on every eval question (not only the cells that
    can show a style effect), and reads their contrast."""
    base = _eval_report({"a": 0.2, "b": 0.5}, cells={"a": "3x1", "b": "5x2"})
    good = _eval_report({"a": 0.8, "b": 0.9}, cells={"a": "3x1", "b": "5x2"})
    flat = _eval_report({"a": 0.2, "b": 0.5}, cells={"a": "3x1", "b": "5x2"})
    rows = testbed._hard_rows(base, {"random": good, "shuffled": flat})
    assert [r["scorer"] for r in rows[0]] == ["random pairs (hard)", "shuffled pairs (hard)"]
    assert rows[0][0]["questions"] == 2 and rows[0][0]["Δ pass@1"] > 40
    assert rows[1]["contrast"].estimate == pytest.approx(rows[0][0]["Δ pass@1"])


def test_the_studys_testbed_reads_the_hard_splits_control_cells():
    """In the study's graph the analysis takes the hard split's DPO on random and on shuffled
    pairs as inputs, and the shuffled pairs are a dataset of their own; the testbed profile,
    which trains no hard split, has neither."""
    import dagster as dg

    from tests.pipeline import ancestors, graph

    assets, _ = graph("study")  # its keys start with the profile's key_prefix, study/
    key = dg.AssetKey(["study", "chain_sum", "testbed_validation"])
    upstream = ancestors(assets, key)
    hard = ["study", "chain_sum", "hard"]
    for pick in ("random", "shuffled"):
        assert dg.AssetKey([*hard, "eval", f"dpo_correctness_{pick}"]) in upstream
    assert dg.AssetKey([*hard, "correctness_pairs", "shuffled"]) in upstream
    assert dg.AssetKey([*hard, "eval", "dpo_correctness_self_judge"]) not in upstream
    testbed_assets, _ = graph("testbed")
    testbed_key = dg.AssetKey(["testbed", "chain_sum", "testbed_validation"])
    assert not any("hard" in k.path for k in ancestors(testbed_assets, testbed_key))


def test_the_shipped_testbed_profile_is_the_documented_design():
    """The defaults that the acceptance rests on, as cells of the plan: ≥ 250 training
    questions asked for on every draw (the shipped model saturates 281 and 273), the positive
    control's threshold, ±3 null band, two data seeds (two adapters per configuration, the
    data's draw in every interval), the full dial for σ-RRHF and DPO, SFT's two controls, β
    up to the paper's 5, learning rates below the demo's 2e-3, and each method's recipe
    chosen on its own oracle cell by the one-SE rule (RAFT on SFT's)."""
    from saturated_dag.experiments import experiment_plan

    profile = load_profile("testbed")
    s, t = profile.testbed, profile.training
    assert s is not None and s.min_training_questions >= 250
    assert s.positive_min_effect == 8.0 and s.null_band == 3.0
    assert profile.data_seeds >= 2 and t.selection.rule == "one_se"
    assert set(known.DIAL) | {known.SHUFFLED} <= set(t.scorers)
    assert set(known.DIAL) | {known.SHUFFLED} <= set(t.method_scorers["dpo"])
    assert t.method_scorers["raft"] == ["oracle", "random"]
    assert 5.0 in t.selection.dpo_betas and max(t.selection.learning_rates) < 2e-3
    plan = experiment_plan(profile)["chain_sum"]
    for cell in plan.main:
        source = "sft" if cell.method in ("sft", "raft") else f"{cell.method}_oracle"
        assert (cell.recipe_from or cell.name) == source, cell.name
        assert (cell in plan.selections) == (cell.recipe_from is None), cell.name


def test_the_shipped_study_profile_is_sized_by_its_controls():
    """Issue 63, the study's defaults as cells of its plan: each data seed's saturated split
    guarded at the testbed's 250 questions, the hard split at least as many, D_prime taken
    whole; each method's recipe chosen on its oracle cell of the saturated split (SFT on its
    own, RAFT on SFT's) by the one-SE rule, and every other cell, of every split and sweep,
    training that recipe; a sweep row keeps the settings it sweeps (Table 9's β and η)."""
    from saturated_dag.experiments import experiment_plan, recipe_settings

    profile = load_profile("study")
    s, t = profile.testbed, profile.training
    assert s is not None and s.minimums() == {"saturated": 250, "strict_saturated": 100,
                                              "hard": 250}
    assert (s.positive_min_effect, s.dpo_min_effect, s.sft_min_effect, s.hard_min_effect,
            s.null_band) == (8.0, 5.0, 3.0, 3.0, 3.0)
    assert profile.chain_sum.strict_questions_per_cell == 200  # D_prime has 200 questions
    assert t.recipes is not None and t.recipes.split == "saturated"
    assert t.selection.rule == "one_se" and profile.data_seeds == 2
    plan = experiment_plan(profile)["chain_sum"]
    choosers = {("saturated", "dpo_oracle"), ("saturated", "rrhf_oracle"), ("saturated", "sft")}
    assert {(c.split, c.name) for c in plan.selections} == choosers
    table9 = {c for row in plan.sweeps["dpo_beta"] for c in [row.experiment]}
    for cell in plan.cells:
        source = plan.recipe_cell(cell)
        if (cell.split, cell.name) in choosers or cell in table9:
            assert source is None, cell.name
            continue
        assert source is not None and source.split == "saturated", cell.name
        owner = "sft" if cell.method in ("sft", "raft") else cell.method
        assert source.name == (owner if owner == "sft" else f"{owner}_oracle"), cell.name
        assert plan.partitions[cell].keys() <= {f"data{d}_seed{r}" for d in (0, 1)
                                                 for r in range(3)}, cell.name
    assert all(len(plan.partitions[c]) == 2 for c in table9)  # its own β and η, two draws
    lambda1 = next(r.experiment for r in plan.sweeps["rank_weight"]
                   if sweep_row_label("rank_weight", r) == "λ=1")
    chosen = {"learning_rate": 1e-4, "rrhf_rank_weight": 0.1, "seed": 0}
    source = plan.recipe_cell(lambda1)
    assert source is not None
    assert recipe_settings(t, source, "rrhf", chosen, lambda1.fixed) == {"learning_rate": 1e-4}
    assert recipe_settings(t, source, "rrhf", chosen, {"learning_rate"}) == {}


def test_the_analysis_refuses_a_draw_whose_split_is_below_its_guard():
    """Issue 63: each split the profile guards, on every data seed; the message names the
    split, the draw, the count and what to raise."""
    from saturated_dag.analysis.testbed import check_training_sizes

    s = load_profile("study").testbed
    assert s is not None

    def parts(saturated: int, strict: int, hard: int, unsolved: int = 0) -> pl.DataFrame:
        return pl.DataFrame({
            "split": ["saturated"] * saturated + ["strict_saturated"] * strict
            + ["hard"] * (hard + unsolved),
            "p_hat": [1.0] * (saturated + strict) + [0.125] * hard + [0.0] * unsolved})

    check_training_sizes(s, {0: parts(250, 100, 250), 1: parts(300, 150, 900)})
    with pytest.raises(ValueError, match=r"the hard split of data seed 1 has 249 training "
                       r"questions with a correct completion, fewer than "
                       r"testbed.min_training_questions \(250\)"):
        check_training_sizes(s, {0: parts(250, 100, 250), 1: parts(300, 150, 249)})
    # the hard split counts the questions its methods train on: those with p-hat > 0
    with pytest.raises(ValueError, match="hard split of data seed 0 has 200 training"):
        check_training_sizes(s, {0: parts(250, 100, 200, unsolved=1_000)})
    with pytest.raises(ValueError, match="strict_saturated split of data seed 0 has 99"):
        check_training_sizes(s, {0: parts(250, 99, 250)})
    shipped = load_profile("testbed").testbed
    assert shipped is not None and shipped.minimums() == {"saturated": 250}
    from saturated_dag.config import ProfileError

    with pytest.raises(ProfileError, match="a split's minimum must be at least 1"):
        load_profile("study", {"testbed": {"min_training_questions": {"hard": 0}}})
    with pytest.raises(ProfileError, match="min_training_questions"):
        load_profile("study", {"testbed": {"min_training_questions": {"easy": 250}}})


def test_a_profile_without_chain_sum_cannot_hold_a_testbed():
    profile = load_profile("demo").model_dump()
    profile.update(tasks=["gsm8k"], testbed={})
    from saturated_dag.config import ProfileError
    from saturated_dag.profiles import parse_profile

    with pytest.raises((ProfileError, ValueError), match="testbed: needs the chain_sum task"):
        parse_profile(profile, "test")


TINY = {
    "chain_sum": {"questions_per_cell": 4, "eval_questions_per_cell": 2,
                  "strict_questions_per_cell": 2},
    "sampling": {"max_new_tokens": 96},
    "training": {"methods": ["rrhf", "dpo", "sft", "raft"],
                 "scorers": ["oracle", "oracle_shuffled", "oracle_rho0"],
                 "method_scorers": {"dpo": ["oracle", "oracle_shuffled"],
                                    "raft": ["oracle", "random"]}, "replicates": 1,
                 "epochs": 1, "validation_questions_per_cell": 1,
                 "selection": {"learning_rates": [3e-4, 1e-3], "dpo_betas": None}},
    "testbed": {"min_training_questions": 1}}
"""The testbed at toy size: each oracle cell (and SFT's) selects between two learning rates;
the shuffled and dial cells and RAFT's controls train the chosen recipes."""


def test_a_tiny_testbed_runs_as_cells_of_the_graph(tmp_path):
    """The testbed job's graph at toy size: the oracle cells select, the other cells train
    the recipe their selection chose (an input of their adapter assets), and the analysis
    reads their eval reports; a second run trains nothing (every adapter a cache hit)."""
    import dagster as dg

    from tests.pipeline import (
        adapter_folder,
        ancestors,
        asset_path,
        graph,
        materialize,
        resources,
    )

    assets, checks = graph("testbed", TINY)
    key = dg.AssetKey(["testbed", "chain_sum", "testbed_validation"])
    by_key = {k: a for a in assets if isinstance(a, dg.AssetsDefinition) for k in a.keys}
    shuffled = by_key[dg.AssetKey(["testbed", "chain_sum", "saturated", "adapter",
                                   "rrhf_oracle_shuffled"])]
    assert dg.AssetKey(["testbed", "chain_sum", "saturated", "selection", "rrhf_oracle"]
                       ) in {dep.asset_key for spec in shuffled.specs for dep in spec.deps}
    upstream = [k for k in by_key if k == key or k in ancestors(assets, key)]
    # with the asset checks, as the job runs them: the pool side's are per data seed
    result = materialize([*assets, *checks], upstream,
                         resources=resources(tmp_path / "out", "testbed", TINY))
    assert result.success
    stored = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", "testbed_validation"))
    assert set(zip(stored["method"], stored["scorer"], strict=True)) == {
        ("σ-RRHF", "oracle"), ("σ-RRHF", "oracle_shuffled"), ("σ-RRHF", "oracle_rho0"),
        ("DPO", "oracle"), ("DPO", "oracle_shuffled"), ("SFT", "sft"), ("RAFT", "oracle"),
        ("RAFT", "random")}
    recipes = dict(zip(stored["method"], stored["recipe"], strict=False))
    assert recipes["RAFT"] == recipes["SFT"] and recipes["σ-RRHF"].startswith("η=")
    out = tmp_path / "out"
    for follower, chooser in (("rrhf_oracle_shuffled", "rrhf_oracle"),
                              ("dpo_oracle_shuffled", "dpo_oracle"), ("raft_random", "sft")):
        selection = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "selection",
                                               chooser)).filter(pl.col("chosen"))
        trained = json.loads((adapter_folder(out, follower) / "training_config.json")
                             .read_text())["settings"]
        assert trained["learning_rate"] == selection["learning_rate"][0], follower
    metadata = result.asset_materializations_for_node("chain_sum__testbed_validation")[0]
    assert next(iter(metadata.metadata)) == "summary"
    verdicts = metadata.metadata
    assert "positive control (σ-RRHF) passed" in verdicts
    assert (tmp_path / "out" / "chain_sum" / "testbed_dose_response.png").is_file()
    # a partition of a cell's adapters is its adapter's page: its own settings, curves and hash
    # under the step's summary, and (once its cell's report evaluated it) its eval result
    pages = {m.partition: m.materialization.metadata
             for m in result.get_asset_materialization_events()
             if m.asset_key == dg.AssetKey(["testbed", "chain_sum", "saturated", "adapter",
                                            "rrhf_oracle"])}
    # the testbed's two data seeds: each configuration trains on each draw's dataset
    assert set(pages) == {f"lr{lr}_data{d}_seed0" for lr in ("0.0003", "0.001") for d in (0, 1)}
    for partition, page in pages.items():
        assert next(iter(page)) == "summary"
        assert page["learning rate"].value == float(partition.split("_")[0].removeprefix("lr"))
        assert {"training curves", "weights hash (data version)", "model card",
                "validation curve", "best epoch"} <= set(page)
    observed = {e.event_specific_data.asset_observation.partition:
                e.event_specific_data.asset_observation.metadata
                for run in result.runs for e in run.get_asset_observation_events()
                if e.asset_key == dg.AssetKey(["testbed", "chain_sum", "saturated", "adapter",
                                               "rrhf_oracle"])}
    chosen_lr = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "selection",
                                           "rrhf_oracle")).filter(pl.col("chosen"))
    assert list(observed) == [f"lr{chosen_lr['learning_rate'][0]:g}_data{d}_seed0"
                              for d in (0, 1)]
    assert "%" in observed[next(iter(observed))]["eval pass@1"].value
    _each_draw_is_its_own(out, stored)
    # one draw re-materialised on its own: one run, its partition only
    pool_key = dg.AssetKey(["testbed", "chain_sum", "generation_pool"])
    one = dg.materialize(assets, selection=[pool_key], partition_key="data1",
                         resources=resources(out, "testbed", TINY))
    assert one.success
    assert [m.partition for m in one.get_asset_materialization_events()] == ["data1"]
    # a killed job leaves the adapters it had not published unpublished: its re-run trains
    # exactly those, and every published one is a cache hit
    import shutil

    shutil.rmtree(adapter_folder(out, "rrhf_oracle_shuffled"))
    again = materialize(assets, upstream, resources=resources(tmp_path / "out", "testbed",
                                                                TINY))
    assert again.success
    caches = {}
    for m in again.get_asset_materialization_events():
        if "adapter" in m.asset_key.path:
            own = m.materialization.metadata  # each partition's record names its folder
            caches[own["adapter folder"].value] = own["cache"].value
    assert caches.pop("rrhf_oracle_shuffled") == "miss"
    assert caches and set(caches.values()) == {"hit"}


def _each_draw_is_its_own(out, stored):
    """Two data seeds: two pools of different questions, each with its own partition file;
    each row's report holds both draws' adapters, and its interval's sample says so."""
    from tests.pipeline import asset_path

    pools = [pl.read_parquet(out / "assets" / "chain_sum" / "generation_pool" / f"data{d}.parquet")
             for d in (0, 1)]
    problems = [set(p["problem"]) for p in pools]
    # two draws, not one shifted by an item (reasoning-gym's item i under seed s + 1 is item
    # i + 1 under s: a base seed + 1 shared 201 of the study's 208 questions)
    assert len(problems[0] & problems[1]) < len(problems[0]) / 2
    report = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "eval", "rrhf_oracle"))
    assert sorted(report["data_seed"].unique()) == [0, 1]
    assert set(stored["data seeds"]) == {2}


READS_THE_VERDICTS = {"testbed_validation", "results_table"}
"""The assets whose code holds the analysis: the analysis itself, and the results table, whose
caption names the methods whose positive control failed (``testbed.unvalidated_note``)."""


def test_editing_the_testbeds_analysis_changes_no_trainings_code_version():
    """The analysis (``saturated_dag/analysis/testbed.py``: verdicts, figure) is in the code version
    of ``chain_sum/testbed_validation`` and of the results table that reads its verdicts
    alone: editing ``dose_response_figure`` re-runs those two tables and never an adapter, a
    selection or an eval report."""
    import dagster as dg

    from assets.versioning import PROJECT, compute_module
    from tests.pipeline import graph

    assets, _ = graph("testbed")
    for a in assets:
        if not isinstance(a, dg.AssetsDefinition) or not a.is_executable:
            continue
        imports = PROJECT.closure(compute_module(a))
        for key in a.keys:
            if key.path[-1] in READS_THE_VERDICTS:
                assert "saturated_dag.analysis.testbed" in imports, key.to_user_string()
            else:
                assert "saturated_dag.analysis.testbed" not in imports, key.to_user_string()


def _validation(rates: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"v{i:02d}" for i in range(len(rates))],
                         "n": [8] * len(rates),
                         "correct": [round(8 * r) for r in rates]})


def test_one_standard_error_rule_prefers_the_smaller_step_within_the_noise():
    """``training.selection.rule: one_se`` (the testbed's recipes), in the project's one
    selection (``selection.selection_table``)."""
    from saturated_dag.training.selection import Trained, chosen, selection_table

    base = np.full(48, 0.75)
    near = base.copy()  # better by 0.52 points: 10 questions up, 8 down, one sample each
    near[:10] += 0.125
    near[10:18] -= 0.125
    far = base - 0.25  # clearly worse: 25 points on every question

    def trained(rates):
        return [Trained(f"lr{lr:g}", {"learning_rate": lr}, [float(r.mean())], [1],
                        [_validation(list(r))]) for lr, r in zip((1e-4, 3e-4, 1e-3), rates,
                                                                 strict=True)]

    best = selection_table(trained([far, base, near]), "best")
    assert chosen(best) == "lr0.001"  # App. B: the highest validation pass@1
    one_se = selection_table(trained([far, base, near]), "one_se")
    gap, se = one_se["behind the best"][1], one_se["one standard error"][1]
    assert gap == pytest.approx(100 * 2 * 0.125 / 48) and 0 < gap < se
    assert chosen(one_se) == "lr0.0003"  # within one standard error: the smaller step
    assert one_se["behind the best"][0] > one_se["one standard error"][0]  # never chosen
    clear = selection_table(trained([far, base - 0.125, near]), "one_se")
    assert chosen(clear) == "lr0.001"  # now clearly behind: the best stays
    with pytest.raises(ValueError, match="unknown selection rule"):
        selection_table(trained([far, base, near]), "median")
    with pytest.raises(ValueError, match="per-question validation"):
        selection_table([Trained("a", {"learning_rate": 1e-4}, [0.5], [1])], "one_se")


def test_a_null_is_read_only_beside_a_passing_positive_control_of_its_own_method():
    from saturated_dag.analysis.findings import Comparison, Control, Result, licence, null_reading

    rrhf = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True)}
    comparison = Comparison("x", "Table 1", "saturated/rrhf_self_judge", "base", "greater")
    open_result = Result(comparison, _interval(0.5, -1.2, 2.4), "inconclusive")
    assert null_reading(open_result, rrhf) == "no effect larger than 2.4 points"
    failed = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", False)}
    assert null_reading(open_result, failed) == (
        "unreadable: σ-RRHF positive control (oracle) did not pass")
    assert null_reading(open_result, None) == "unreadable: this run has no testbed"
    holds = Result(comparison, _interval(3.0, 1.0, 5.0), "holds")
    assert null_reading(holds, rrhf) == ""
    assert licence(open_result, rrhf) == "σ-RRHF positive control (oracle): passed"


def test_a_dpo_null_with_a_failing_dpo_control_reads_unreadable():
    """A null that involves DPO: σ-RRHF's passing control does not license it, and neither
    does DPO's oracle control license the hard split's DPO (its own control is correctness)."""
    from saturated_dag.analysis.findings import Comparison, Control, Result, licence, null_reading

    controls = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True),
                "dpo": Control("dpo", "DPO positive control (oracle)", False)}
    comparison = Comparison("the strong judge's pairs beat random pairs", "Table 1",
                            "saturated/dpo_strong_judge", "saturated/dpo_random", "greater")
    null = Result(comparison, _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(null, controls) == "unreadable: DPO positive control (oracle) did not pass"
    assert licence(null, controls) == "DPO positive control (oracle): FAILED"
    # a comparison of two methods needs both controls
    mixed = Result(Comparison("x", "Table 1", "saturated/rrhf_self_judge",
                              "saturated/dpo_self_judge", "greater"),
                   _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(mixed, controls).startswith("unreadable: DPO")
    assert null_reading(mixed, {"rrhf": controls["rrhf"]}) == (
        "unreadable: no positive control of DPO in this run")
    # the hard split's DPO: its own known-signal control, failing, then passing
    hard = Result(Comparison("hard split: self-judge pairs beat random pairs", "Table 7",
                             "hard/dpo_correctness_self_judge", "hard/dpo_correctness_random",
                             "greater"), _interval(0.2, -0.9, 1.3), "inconclusive")
    known_signal = "DPO known-signal control on the hard split"
    controls["hard/dpo"] = Control("dpo", known_signal, False)
    assert null_reading(hard, controls) == f"unreadable: {known_signal} did not pass"
    assert licence(hard, controls) == f"{known_signal}: FAILED"
    controls["dpo"] = Control("dpo", "DPO positive control (oracle)", True)
    assert null_reading(null, controls) == "no effect larger than 1.3 points"
    assert null_reading(hard, controls).startswith("unreadable")  # the oracle's is not its
    controls["hard/dpo"] = Control("dpo", known_signal, True)
    assert null_reading(hard, controls) == "no effect larger than 1.3 points"


def test_a_negligible_finding_that_holds_is_a_null_and_needs_its_control():
    """"Removing the logistic weight has negligible effect" claims no effect: its holding is
    read beside σ-RRHF's own positive control, like any null; a directional finding that
    holds needs none."""
    from saturated_dag.analysis.findings import Comparison, Control, Result, null_reading

    negligible = Result(Comparison("removing the logistic weight has negligible effect",
                                   "Table 8", "hard/rrhf_self_judge_no_logistic",
                                   "hard/rrhf_self_judge", "negligible"),
                        _interval(-0.03, -1.02, 0.91), "holds")
    failed = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", False)}
    assert null_reading(negligible, failed) == (
        "unreadable: σ-RRHF positive control (oracle) did not pass")
    passed = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True)}
    assert null_reading(negligible, passed) == "no effect larger than 1.0 points"
    hurts = Result(Comparison("λ ≥ 0.5 hurts", "Figure 6", "hard/rrhf_self_judge_lambda1",
                              "hard/rrhf_self_judge_lambda0", "less"),
                   _interval(-2.75, -3.84, -1.71), "holds")
    assert null_reading(hurts, failed) == ""


def test_a_contrast_of_identical_by_construction_scorers_reads_unreadable():
    from saturated_dag.analysis.findings import Comparison, Control, Result, null_reading

    controls = {"dpo": Control("dpo", "DPO positive control (oracle)", True)}
    copies = [frozenset({"self_judge", "strong_judge"})]
    contrast = Comparison("the strong judge beats the self-judge", "Table 2",
                          "saturated/dpo_strong_judge", "saturated/dpo_self_judge", "greater")
    for interval, verdict in ((_interval(0.0, -0.5, 0.5), "inconclusive"),
                              (_interval(2.0, 1.0, 3.0), "holds")):
        result = Result(contrast, interval, verdict)
        assert null_reading(result, controls, copies) == (
            "unreadable: identical by construction (the two scorers are copies)")
        assert not null_reading(result, controls).startswith("unreadable: identical")
    # another contrast of the same rows is not a contrast of the copies
    other = Result(Comparison("x", "Table 1", "saturated/dpo_self_judge", "base", "greater"),
                   _interval(0.0, -0.5, 0.5), "inconclusive")
    assert null_reading(other, controls, copies) == "no effect larger than 0.5 points"


NO_SWEEPS = {"sweeps": {"rank_weight": None, "rrhf_variants": None, "dpo_beta": None}}
"""(The graph's sweeps would refuse a profile without σ-RRHF's SFT term at λ = 0.)"""


class _ReachedTheTrainer(Exception):
    """Raised by the stand-in for ``train_adapter``: the settings have arrived."""


@pytest.mark.parametrize("method", ["rrhf", "dpo", "sft", "raft"])
def test_every_training_setting_reaches_the_trainer_on_every_route(method, tmp_path,
                                                                   monkeypatch):
    """One route from the profile to the trainer: for every setting of the ``training``
    section, changed from its default one at a time, a testbed adapter that trains its
    recipe cell's choice (``Experiment.with_recipe``) gets a ``TrainingRequest`` from the graph's
    own ``training.resolve.adapter_request``; the request survives its JSON (the route into a Pipes
    child or a side-by-side worker), the runner's ``train_request`` (which every policy of
    ``training.runner`` calls) hands its settings to ``train_adapter``, and the trainer's
    config (TRL's, or σ-RRHF's) and LoRA's built from them hold the value the profile set,
    with the recipe's learning rate (and β). Dropping a setting anywhere on the way fails."""
    import polars as pl

    from saturated_dag.experiments import experiment_plan
    from saturated_dag.training import runner, train
    from saturated_dag.training.request import TrainingRequest
    from saturated_dag.training.resolve import adapter_request

    changed = {"gradient_checkpointing": True, "rrhf_use_sft": False, "rrhf_hinge": False,
               "rrhf_logistic_weight": False, "rrhf_sft_token_mean": False,
               "rrhf_rank_weight": 0.7, "max_length": 333, "dtype": "bfloat16",
               "lora_r": 3, "lora_alpha": 5, "lora_dropout": 0.2, "batch_size": 16,
               "per_device_batch_size": 16, "dpo_beta": 0.37, "dpo_nll_weight": 0.5,
               "dpo_loss_type": "apo_zero"}
    alongside = {"per_device_batch_size": {"batch_size": 16}}  # a multiple of it, and ≥ n
    recipe = {"learning_rate": 3e-4, **({"dpo_beta": 0.5} if method == "dpo" else {})}
    scorer = {"rrhf": "oracle_shuffled", "dpo": "oracle_shuffled", "raft": "random"}
    training = {"methods": ["rrhf", "dpo", "sft", "raft"], **NO_SWEEPS}

    data = tmp_path / "d.parquet"
    atomic_write_parquet(pl.DataFrame({"prompt": ["x"]}), data)
    arrived = []

    def stand_in(method, base_model, frame, training, out_dir, **kwargs):
        arrived.append(training)
        raise _ReachedTheTrainer

    monkeypatch.setattr(train, "train_adapter", stand_in)

    def settings(profile):
        plan = experiment_plan(profile)["chain_sum"]
        cell = next(c for c in plan.main if c.method == method
                    and c.scorer == scorer.get(method))
        adapter = next(iter(plan.partitions[cell].values())).with_recipe(recipe)
        if method != "sft":
            assert cell.recipe_from is not None  # a cell that trains another's choice
        request = adapter_request(profile, "chain_sum", adapter, profile.policy, data,
                                  tmp_path / "out", "key", {})
        child = TrainingRequest.from_json(request.to_json())
        assert child.training == request.training
        with pytest.raises(_ReachedTheTrainer):
            runner.train_request(child, runner.validator_for(child))
        assert arrived[-1] == child.training
        return arrived[-1]

    def built(config, lora):
        return config.to_dict(), lora.to_dict()

    base = load_profile("testbed", {"training": training})
    default = built(*_trainer_config(method, settings(base), base.sampling.n))
    reached = set()
    for field, value in changed.items():
        profile = load_profile("testbed", {"training": {
            **training, field: value, **alongside.get(field, {})}})
        config, lora = _trainer_config(method, settings(profile), profile.sampling.n)
        if built(config, lora) != default:
            reached.add(field)
        assert config.learning_rate == 3e-4, field
        if method == "dpo":
            assert config.beta == 0.5, field  # the recipe's β, not the profile's
        for name, want in {field: value, **alongside.get(field, {})}.items():
            if name in TRAINER_FIELDS.get(method, set()) | TRAINER_FIELDS["*"]:
                if name == "batch_size":  # reached as micro-batches per optimizer step
                    want = want // profile.training.per_device_batch_size
                got = _config_value(name, config, lora)
                assert got == want, (field, name, got)
    own = {"rrhf": {"rrhf_use_sft", "rrhf_hinge", "rrhf_logistic_weight", "rrhf_sft_token_mean",
                    "rrhf_rank_weight"}, "dpo": {"dpo_nll_weight", "dpo_loss_type"}
           }.get(method, set())
    common = {"gradient_checkpointing", "max_length", "dtype", "lora_r", "lora_alpha",
              "lora_dropout", "batch_size", "per_device_batch_size"}
    assert common | own <= reached  # each setting changed what the adapter trains with


TRAINER_FIELDS = {
    "*": {"gradient_checkpointing", "max_length", "dtype", "lora_r", "lora_alpha",
          "lora_dropout", "batch_size"},
    "rrhf": {"rrhf_use_sft", "rrhf_hinge", "rrhf_logistic_weight", "rrhf_sft_token_mean",
             "rrhf_rank_weight"},
    "dpo": {"dpo_nll_weight", "dpo_loss_type"}}
"""The profile's training settings each method's trainer config carries (β too, but the
testbed's recipe sets it: a DPO run's β is the recipe's, checked on its own)."""


def _trainer_config(method: str, training, n: int):
    """The trainer config and LoRA config the training settings that reached the trainer
    build, as ``train_adapter`` builds them (``train.trainer_config``, ``train.lora_config``;
    σ-RRHF's forward pass holds whole questions of ``n`` completions)."""
    from saturated_dag.training.config import resolve_dtype
    from saturated_dag.training.rrhf_trainer import rrhf_questions_per_device
    from saturated_dag.training.train import lora_config, trainer_config

    per_device = (rrhf_questions_per_device(training.per_device_batch_size, n)
                  if method == "rrhf" else None)
    return (trainer_config(method, training, "/nonexistent", resolve_dtype(training.dtype),
                           per_device=per_device), lora_config(training))


def _config_value(name: str, config, lora):
    """The value the trainer's config holds for profile setting ``name``."""
    return {
        "gradient_checkpointing": lambda: config.gradient_checkpointing,
        "max_length": lambda: config.max_length,
        "dtype": lambda: "bfloat16" if config.bf16 else "float32",
        "lora_r": lambda: lora.r, "lora_alpha": lambda: lora.lora_alpha,
        "lora_dropout": lambda: lora.lora_dropout,
        "batch_size": lambda: config.gradient_accumulation_steps,
        "rrhf_use_sft": lambda: config.use_sft, "rrhf_hinge": lambda: config.hinge,
        "rrhf_logistic_weight": lambda: config.logistic_weight,
        "rrhf_sft_token_mean": lambda: config.sft_token_mean,
        "rrhf_rank_weight": lambda: config.rank_weight,
        "dpo_loss_type": lambda: config.loss_type[0],
        "dpo_beta": lambda: config.beta,
        "dpo_nll_weight": lambda: (config.loss_weights or [0.0, 0.0])[1],
    }[name]()


def test_the_study_report_marks_a_method_whose_control_failed_unvalidated():
    import sys

    from saturated_dag.analysis.findings import Control

    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    from study_report import unvalidated

    controls = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True),
                "dpo": Control("dpo", "DPO positive control (oracle)", False)}
    lines = unvalidated(controls)
    assert lines[0].startswith("**DPO is unvalidated in the embedded world:**")
    assert not any("σ-RRHF" in line for line in lines)
    assert unvalidated(None) == [] and unvalidated({"rrhf": controls["rrhf"]}) == []




def test_a_study_table_that_shows_an_unvalidated_method_says_so_below_it():
    """Every table of the study report that shows a method whose control failed carries the
    mark; a table without that method, or a run whose controls passed, does not."""
    import sys

    from saturated_dag.analysis.findings import Control

    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    from study_report import unvalidated_rows

    failed = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True),
              "dpo": Control("dpo", "DPO positive control (oracle)", False)}
    table = "| split | method |\n|---|---|\n| saturated | DPO        |\n| hard | σ-RRHF |"
    marked = unvalidated_rows(table, failed)
    assert marked[0].startswith("*DPO is unvalidated in the embedded world*")
    assert unvalidated_rows("| split | method |\n| hard | σ-RRHF |", failed) == []
    passed = {"dpo": Control("dpo", "DPO positive control (oracle)", True)}
    assert unvalidated_rows(table, passed) == [] and unvalidated_rows(table, None) == []


def test_a_results_caption_names_the_methods_shown_whose_control_failed():
    """The results table of a run with a testbed says, in its caption, which methods it shows
    are unvalidated (their positive control failed in that run), and only those."""
    from saturated_dag.analysis.testbed import unvalidated_note

    verdicts = {"positive control (σ-RRHF)": {"passed": True},
                "positive control (DPO)": {"passed": False},
                "positive control (SFT)": {"passed": True}}
    note = unvalidated_note(verdicts, {"Base model", "DPO", "σ-RRHF", "SFT"})
    assert "DPO is unvalidated in the embedded world" in note and "σ-RRHF" not in note
    assert unvalidated_note(verdicts, {"σ-RRHF", "SFT"}) == ""
    assert unvalidated_note({"positive control (DPO)": {"passed": True}}, {"DPO"}) == ""
