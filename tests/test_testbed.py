"""The calibrated testbed: known-answer scorers (oracle, shuffled control, reliability dial) and
the controls' verdicts (docs/testbed.md)."""

import random

import numpy as np
import polars as pl
import pytest

from saturated_dag import testbed
from saturated_dag.config import TestbedSettings as Settings
from saturated_dag.config import load_profile
from saturated_dag.pretrain.styles import STYLES, detect_style, render_solution, sample_expression
from saturated_dag.scorers import agreement
from saturated_dag.scorers import oracle as known
from saturated_dag.scorers.scored_completions import ScoredCompletions
from saturated_dag.statistics import Interval

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
    v = testbed._verdicts(s, intervals, {}, {})
    assert v[POS_RRHF]["passed"] and v[NEG_RRHF]["passed"]
    assert v["dose-response (σ-RRHF)"]["spearman"] == pytest.approx(1.0)
    # a positive control below the threshold, or with its interval touching 0, fails
    intervals[("rrhf", "oracle")] = _interval(7.0, 4.0, 10.0)
    assert not testbed._verdicts(s, intervals, {}, {})[POS_RRHF]["passed"]
    intervals[("rrhf", "oracle")] = _interval(9.0, -0.5, 18.0)
    assert not testbed._verdicts(s, intervals, {}, {})[POS_RRHF]["passed"]
    # a shuffled control whose interval reaches past the null band fails, as does one that
    # excludes 0
    intervals[("rrhf", known.SHUFFLED)] = _interval(0.5, -3.5, 4.0)
    assert not testbed._verdicts(s, intervals, {}, {})[NEG_RRHF]["passed"]
    intervals[("rrhf", known.SHUFFLED)] = _interval(2.0, 0.5, 2.9)
    assert not testbed._verdicts(s, intervals, {}, {})[NEG_RRHF]["passed"]


def test_each_methods_control_verdicts_are_computed_from_its_own_rows():
    """σ-RRHF's passing rows license nothing about DPO: DPO's verdicts read DPO's rows alone,
    and changing σ-RRHF's rows leaves them as they were."""
    s = Settings()
    dpo_flat = {("dpo", name): _interval(-0.4, -1.4, 0.6) for name in (*known.DIAL,
                                                                         known.SHUFFLED)}
    v = testbed._verdicts(s, {**_passing_rows("rrhf"), **dpo_flat}, {}, {})
    assert v[POS_RRHF]["passed"] and not v[POS_DPO]["passed"]
    assert v[NEG_DPO]["passed"]  # DPO's shuffled rows are flat, as a null should be
    found = testbed.controls(v)
    assert found["rrhf"].passed and not found["dpo"].passed
    failing_rrhf = {key: _interval(-5.0, -8.0, -2.0) for key in _passing_rows("rrhf")}
    again = testbed._verdicts(s, {**failing_rrhf, **dpo_flat}, {}, {})
    assert {k: again[k] for k in (POS_DPO, NEG_DPO)} == {k: v[k] for k in (POS_DPO, NEG_DPO)}
    assert not again[POS_RRHF]["passed"]
    # DPO's own threshold (5 points), not σ-RRHF's 8
    v = testbed._verdicts(s, {**dpo_flat, ("dpo", "oracle"): _interval(6.0, 3.0, 9.0)}, {}, {})
    assert v[POS_DPO]["passed"] and testbed.controls(v)["dpo"].passed
    assert "rrhf" not in testbed.controls(v)  # no σ-RRHF rows: no σ-RRHF control


def test_sfts_control_is_the_oracles_best_against_a_random_correct_completion():
    s = Settings()
    v = testbed._verdicts(s, {}, {}, {}, sft_contrast=_interval(4.0, 1.0, 7.0))
    assert v["positive control (SFT)"]["passed"]
    found = testbed.controls(v)
    assert found["sft"].passed and found["raft"].passed  # RAFT is the controls' own trainer
    v = testbed._verdicts(s, {}, {}, {}, sft_contrast=_interval(1.0, -1.0, 3.0))
    assert not testbed.controls(v)["sft"].passed
    assert testbed.role_of("raft", "oracle").startswith("SFT positive control")
    assert testbed.role_of("raft", "random").startswith("SFT reference")


def test_the_shipped_testbed_profile_is_the_documented_design():
    """The defaults that the acceptance rests on: ≥ 300 training questions asked for, the
    positive control's threshold, ±3 null band, replicates over data and training seeds, the
    full dial, β up to the paper's 5, and a learning-rate grid below the demo's 2e-3."""
    s = load_profile("testbed").testbed
    assert s is not None
    assert s.min_training_questions >= 300
    assert s.positive_min_effect == 8.0 and s.null_band == 3.0
    assert len(s.data_seeds) >= 2 and len(s.training_seeds) >= 2
    assert set(known.DIAL) | {known.SHUFFLED} <= set(s.scorers)
    assert 5.0 in s.dpo_betas and max(s.learning_rates) < 2e-3


def test_a_profile_without_chain_sum_cannot_hold_a_testbed():
    profile = load_profile("demo").model_dump()
    profile.update(tasks=["gsm8k"], testbed={})
    from saturated_dag.config import ProfileError, parse_profile

    with pytest.raises((ProfileError, ValueError), match="testbed: needs the chain_sum task"):
        parse_profile(profile, "test")


TINY = {"testbed": dict(
    questions_per_cell=10, min_training_questions=2, validation_questions_per_cell=2,
    eval_questions_per_cell=4, data_seeds=[0], training_seeds=[0], methods=["rrhf"],
    scorers=["oracle", "oracle_shuffled", "oracle_rho0"], sft=False,
    learning_rates=[3e-4], epochs=1, workers=1,
    dpo_search=None)}  # the shipped profile's search trains 40 recipes: its own tiny test


def test_a_tiny_testbed_runs_end_to_end(tmp_path):
    """The whole runner on the embedded model at toy size, in this process: pools, scores,
    the recipe selection, replicates, the analysis and its files; a rerun reuses every run."""
    profile = load_profile("testbed", TINY)
    logs: list[str] = []
    result = testbed.run_testbed(profile, tmp_path, log=logs.append)
    assert set(result.rows["scorer"]) == {"oracle", "oracle_shuffled", "oracle_rho0"}
    assert result.rows["questions"].unique().to_list() == [
        4 * len(result.facts["cells used"])]
    assert POS_RRHF in result.verdicts and NEG_RRHF in result.verdicts
    assert "positive control (DPO)" not in result.verdicts  # no DPO rows, no DPO control
    paths = testbed.write_outputs(result, tmp_path / "chain_sum")
    assert all(p.exists() for p in paths.values())
    logs.clear()
    again = testbed.run_testbed(profile, tmp_path, log=logs.append)
    assert not any("item(s)" in line for line in logs)  # nothing trained or sampled again
    assert again.rows.equals(result.rows)


def test_sfts_two_controls_train_with_sfts_recipe_and_give_its_verdict(tmp_path):
    """The shipped default trains SFT (``testbed.sft``): its two controls, RAFT on the
    oracle's best and on a random correct completion, train with SFT's chosen recipe, and
    SFT's positive control is their paired contrast."""
    assert Settings().sft and load_profile("testbed").testbed.sft
    profile = load_profile("testbed", {"testbed": {**TINY["testbed"], "sft": True,
                                                   "scorers": ["oracle"]}})
    result = testbed.run_testbed(profile, tmp_path)
    raft = result.rows.filter(pl.col("method") == "RAFT")
    assert sorted(raft["scorer"]) == ["oracle", "random"]
    sft_recipe = result.rows.filter(pl.col("method") == "SFT")["recipe"].to_list()
    assert set(raft["recipe"]) == set(sft_recipe)
    assert "positive control (SFT)" in result.verdicts
    assert set(testbed.controls(result.verdicts)) == {"rrhf", "sft", "raft"}


def _validation(rates: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"question_id": [f"v{i:02d}" for i in range(len(rates))],
                         "n": [8] * len(rates),
                         "correct": [round(8 * r) for r in rates]})


def test_one_standard_error_rule_prefers_the_smaller_step_within_the_noise():
    base = np.full(48, 0.75)
    near = base.copy()  # better by 0.52 points: 10 questions up, 8 down, one sample each
    near[:10] += 0.125
    near[10:18] -= 0.125
    far = base - 0.25  # clearly worse: 25 points on every question
    recipes = [testbed.Recipe("rrhf", lr) for lr in (1e-4, 3e-4, 1e-3)]
    tables = [_validation(list(far)), _validation(list(base)), _validation(list(near))]
    best, margins = testbed.choose_recipe(recipes, tables, "best")
    assert best == 2  # App. B: the highest validation pass@1
    gap, se = margins[1]
    assert gap == pytest.approx(100 * 2 * 0.125 / 48) and 0 < gap < se
    one_se, _ = testbed.choose_recipe(recipes, tables, "one_se")
    assert one_se == 1  # within one standard error: the smaller step
    assert margins[0][0] > margins[0][1]  # beyond it: never chosen
    tables[1] = _validation(list(base - 0.125))  # now clearly behind: the best stays
    assert testbed.choose_recipe(recipes, tables, "one_se")[0] == 2
    with pytest.raises(ValueError, match="unknown selection rule"):
        testbed.choose_recipe(recipes, tables, "median")


def test_a_null_is_read_only_beside_a_passing_positive_control_of_its_own_method():
    from saturated_dag.findings import Comparison, Control, Result, licence, null_reading

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
    """The hard split's "self-judge pairs beat random pairs" involves DPO alone: σ-RRHF's
    passing control does not license its null."""
    from saturated_dag.findings import Comparison, Control, Result, licence, null_reading

    controls = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True),
                "dpo": Control("dpo", "DPO positive control (oracle)", False)}
    comparison = Comparison("hard split: self-judge pairs beat random pairs", "Table 7",
                            "hard/dpo_correctness_self_judge", "hard/dpo_correctness_random",
                            "greater")
    null = Result(comparison, _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(null, controls) == "unreadable: DPO positive control (oracle) did not pass"
    assert licence(null, controls) == "DPO positive control (oracle): FAILED"
    # a comparison of two methods needs both controls
    mixed = Result(Comparison("x", "Table 7", "hard/rrhf_self_judge",
                              "hard/dpo_correctness_self_judge", "greater"),
                   _interval(0.2, -0.9, 1.3), "inconclusive")
    assert null_reading(mixed, controls).startswith("unreadable: DPO")
    assert null_reading(mixed, {"rrhf": controls["rrhf"]}) == (
        "unreadable: no positive control of DPO in this run")
    controls["dpo"] = Control("dpo", "DPO positive control (oracle)", True)
    assert null_reading(null, controls) == "no effect larger than 1.3 points"


def test_a_contrast_of_identical_by_construction_scorers_reads_unreadable():
    from saturated_dag.findings import Comparison, Control, Result, null_reading

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


@pytest.mark.parametrize("method", ["rrhf", "dpo", "sft", "raft"])
def test_every_training_setting_reaches_the_testbeds_runs_as_it_reaches_the_graphs(method):
    """The testbed trains by the graph's route: for every setting of the profile's
    ``training`` section, changed from its default one at a time, the testbed run's trainer
    settings equal those of the graph's adapter with the same recipe, and survive the
    training job's JSON (the route into a Pipes child or a worker). Dropping a setting on the
    testbed's route (as gradient checkpointing and the σ-RRHF switches once were) fails."""
    from dataclasses import asdict

    from saturated_dag.config import TrainingSettings
    from saturated_dag.training.config import settings_for
    from saturated_dag.training.job import TrainingJob

    changed = {"gradient_checkpointing": True, "rrhf_use_sft": False, "rrhf_hinge": False,
               "rrhf_logistic_weight": False, "rrhf_sft_token_mean": False,
               "rrhf_rank_weight": 0.7, "max_length": 333, "dtype": "bfloat16",
               "lora_r": 3, "lora_alpha": 5, "lora_dropout": 0.2, "batch_size": 16,
               "per_device_batch_size": 16, "dpo_beta": 0.37, "dpo_nll_weight": 0.5}
    alongside = {"per_device_batch_size": {"batch_size": 16}}  # a multiple of it, and ≥ n
    base = load_profile("testbed", {**TINY, "training": NO_SWEEPS})
    reached = set()
    for field, value in changed.items():
        profile = load_profile("testbed", {**TINY, "training": {
            field: value, **alongside.get(field, {}), **NO_SWEEPS}})
        recipe = testbed.Recipe(method, 3e-4, 0.5 if method == "dpo" else None)
        run = testbed.Run(recipe, "oracle", 0, 1)
        bed = testbed.Testbed(profile, "/nonexistent")
        overrides = {"learning_rate": 3e-4, "epochs": profile.testbed.epochs, "seed": 1,
                     **({"dpo_beta": 0.5} if method == "dpo" else {})}
        graph = asdict(settings_for(method, TrainingSettings.model_validate(
            {**profile.training.model_dump(), **overrides})))
        assert bed.train_settings(run) == graph, field
        job = TrainingJob(profile=profile, task="chain_sum", method=method,
                          training_overrides=overrides, base_model="arith-base", batch_size=4,
                          data="d.parquet", out_dir="out")
        child = TrainingJob.from_json(job.to_json())
        assert asdict(child.trainer_settings()) == graph, field
        default = testbed.Testbed(base, "/nonexistent").train_settings(run)
        if default != graph:
            reached.add(field)
        # ... and on to the trainer's own config (TRL's, or σ-RRHF's) and LoRA's, with the
        # value the profile set
        config, lora = _trainer_config(method, bed.train_settings(run))
        expected = {field: value, **alongside.get(field, {})}
        for name, want in expected.items():
            if name in TRAINER_FIELDS.get(method, set()) | TRAINER_FIELDS["*"]:
                if name == "batch_size":  # reached as micro-batches per optimizer step
                    want = want // profile.training.per_device_batch_size
                got = _config_value(name, config, lora)
                assert got == want, (field, name, got)
        if method == "dpo":
            assert config.beta == recipe.beta and config.learning_rate == recipe.learning_rate
    own = {"rrhf": {"rrhf_use_sft", "rrhf_hinge", "rrhf_logistic_weight", "rrhf_sft_token_mean",
                    "rrhf_rank_weight"}, "dpo": {"dpo_nll_weight"}}.get(method, set())
    common = {"gradient_checkpointing", "max_length", "dtype", "lora_r", "lora_alpha",
              "lora_dropout", "batch_size", "per_device_batch_size"}
    assert common | own <= reached  # each setting changed what the run trains with


TRAINER_FIELDS = {
    "*": {"gradient_checkpointing", "max_length", "dtype", "lora_r", "lora_alpha",
          "lora_dropout", "batch_size"},
    "rrhf": {"rrhf_use_sft", "rrhf_hinge", "rrhf_logistic_weight", "rrhf_sft_token_mean",
             "rrhf_rank_weight"},
    "dpo": {"dpo_nll_weight"}}
"""The profile's training settings each method's trainer config carries (β too, but the
testbed's recipe sets it: a DPO run's β is the recipe's, checked on its own)."""


def _trainer_config(method: str, settings: dict):
    """The trainer config and LoRA config a testbed run's settings build, as its worker
    builds them (``testbed._train`` -> ``train.trainer_config``)."""
    from saturated_dag.training.config import SETTINGS_OF_METHOD, LoraSettings, resolve_dtype
    from saturated_dag.training.train import _lora, trainer_config

    rebuilt = SETTINGS_OF_METHOD[method](**{**settings, "lora": LoraSettings(
        **settings["lora"])})
    return (trainer_config(method, rebuilt, "/nonexistent", resolve_dtype(rebuilt.dtype),
                           per_device=1), _lora(rebuilt))


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
        "dpo_beta": lambda: config.beta,
        "dpo_nll_weight": lambda: (config.loss_weights or [0.0, 0.0])[1],
    }[name]()


def test_the_testbed_asset_materialises_its_table_and_figure(tmp_path):
    """The Dagster asset of the `testbed` job (tiny settings): its frame passes the Parquet IO
    manager's declared schema, and its first metadata entry is the verdicts' headline."""
    import dagster as dg

    from tests.pipeline import asset_path, graph, resources

    assets, _ = graph("testbed", TINY)
    key = dg.AssetKey(["chain_sum", "testbed_validation"])
    result = dg.materialize(assets, selection=[key],
                            resources=resources(tmp_path / "out", "testbed", TINY))
    assert result.success
    metadata = result.asset_materializations_for_node("chain_sum__testbed_validation")[0].metadata
    assert next(iter(metadata)) == "headline"
    assert "positive control" in metadata["headline"].value
    stored = pl.read_parquet(asset_path(tmp_path / "out", "chain_sum", "testbed_validation"))
    assert set(stored["scorer"]) == {"oracle", "oracle_shuffled", "oracle_rho0"}
    assert (tmp_path / "out" / "chain_sum" / "testbed_dose_response.png").is_file()


def _samples(rates: list[float], completion: str = "1 + 2 = 3 \\boxed{3}") -> pl.DataFrame:
    """Eval samples: question i's 8 samples, ``round(8 * rates[i])`` of them correct."""
    rows = [{"question_id": f"q{i:02d}", "cell": "3x1", "sample_index": j,
             "completion": completion, "correct": j < round(8 * rate)}
            for i, rate in enumerate(rates) for j in range(8)]
    return pl.DataFrame(rows)


def test_the_dpo_search_reads_each_recipes_controls_margins_and_choice():
    """Per recipe: the oracle's and the shuffled control's Δ with intervals, whether DPO's
    controls pass there, the margins and log-probabilities from its log; the verdict names
    the passing recipes and diagnoses a search where none passes."""
    from saturated_dag import dpo_search

    base = _samples([0.5] * 40)
    lifted = _samples([0.5 + 0.25 * (i % 2) + 0.125 for i in range(40)])  # about +25 points
    log_down = [{"step": 1, "rewards/margins": 0.1, "logps/chosen": -10.0,
                 "logps/rejected": -10.0},
                {"step": 9, "rewards/margins": 3.0, "logps/chosen": -14.0,
                 "logps/rejected": -20.0}]
    validation = _validation([0.5] * 8)
    runs = [dpo_search.SearchRun(0.1, 1e-4, 0.0, base, base, validation, 2, log_down),
            dpo_search.SearchRun(5.0, 1e-4, 1.0, lifted, base, _validation([0.75] * 8), 3,
                                 log_down),
            dpo_search.SearchRun(1.0, 3e-4, 0.0, lifted, None, validation, 1, [])]
    table = dpo_search.search_table(runs, base, ["3x1"], 5.0, 3.0, "best")
    # the third recipe's oracle gained, but with no shuffled control it cannot pass
    assert table["passes"].to_list() == [False, True, False]
    assert table["shuffled Δ"][2] is None and table["reward margin (last)"][2] is None
    assert table["chosen"].to_list() == [False, True, False]  # the best validation pass@1
    assert table["oracle Δ"][1] == pytest.approx(25.0) and table["oracle low"][1] > 0
    assert table["reward margin (last)"][0] == 3.0
    assert table["chosen log-prob moved"][0] == -4.0
    assert table["rejected log-prob moved"][0] == -10.0
    found = dpo_search.verdict(table)
    assert found["passed"] and found["passing"] == ["β=5, η=1e-04, NLL 1"]
    assert found["chosen passes"]
    none = dpo_search.verdict(table.with_columns(passes=pl.lit(False)))
    assert not none["passed"] and not none["chosen passes"]
    assert "unvalidated" in none["reading"]
    assert "pushing both log-probabilities down" in none["diagnosis"]


def test_a_tiny_dpo_search_trains_both_arms_and_draws_its_grid(tmp_path):
    profile = load_profile("testbed", {"testbed": {
        **TINY["testbed"], "dpo_search": {"betas": [0.1], "learning_rates": [3e-4],
                                          "epochs": 1, "nll_weights": [0.0, 1.0]}}})
    result = testbed.run_testbed(profile, tmp_path)
    assert result.dpo_search is not None
    assert result.dpo_search["NLL weight"].to_list() == [0.0, 1.0]
    assert result.dpo_search["reward margin (last)"].null_count() == 0
    assert "DPO recipe search" in result.verdicts
    assert "DPO recipe search" in testbed.headline(result)
    paths = testbed.write_outputs(result, tmp_path / "chain_sum")
    assert paths["dpo search figure"].is_file()


def test_the_study_report_marks_a_method_whose_control_failed_unvalidated():
    import sys
    from pathlib import Path

    from saturated_dag.findings import Control

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from study_report import unvalidated

    controls = {"rrhf": Control("rrhf", "σ-RRHF positive control (oracle)", True),
                "dpo": Control("dpo", "DPO positive control (oracle)", False)}
    lines = unvalidated(controls)
    assert lines[0].startswith("**DPO is unvalidated in the embedded world:**")
    assert not any("σ-RRHF" in line for line in lines)
    assert unvalidated(None) == [] and unvalidated({"rrhf": controls["rrhf"]}) == []


def test_the_testbeds_workers_are_bound_to_the_run(monkeypatch):
    """Each worker of the testbed's pool gets the lifeline of every worker of a run, bound
    to the process that started the pool; in-process work binds nothing."""
    from saturated_dag import lifeline

    bound: list[int] = []
    monkeypatch.setattr(lifeline, "bind_worker", bound.append)
    testbed._init_worker(4242)
    testbed._init_worker()
    assert bound == [4242]
