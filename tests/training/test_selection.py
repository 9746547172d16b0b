"""The paper's selection protocol (App. B) and training-seed replicates: each cell trains its
configurations over its seeds, the best validation pass@1 is chosen, and the cell's
eval report evaluates the chosen configuration's seeds."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from saturated_dag.config import ProfileError
from saturated_dag.experiments import (
    Experiment,
    cell_adapters,
    configurations,
    experiment_matrix,
    experiment_plan,
    replicates,
    trained_adapters,
)
from saturated_dag.profiles import load_profile
from saturated_dag.training.selection import Trained, chosen, selection_table
from tests.pipeline import adapter_folder, asset_path, graph, materialize, resources
from tests.scoring_data import store_pool_and_partitions


def _training(**training):
    """The demo's training section with ``training`` laid over it; the selection mechanics below
    start from a single learning rate (the demo selects η from two)."""
    training.setdefault("selection", {}).setdefault("learning_rates", None)
    return load_profile("demo", {"training": training}).training


def test_one_configuration_and_one_seed_train_the_cell_itself() -> None:
    training = _training(selection={"dpo_betas": None})
    for cell in experiment_matrix(training):
        [adapter] = configurations(training, cell, 8)
        assert (adapter.name, adapter.overrides) == (cell.name, cell.overrides)
        assert replicates(training, adapter) == [adapter]
        # Figure 6's λ = 0 is the mean of three runs (App. C.2), every other row one seed
        seeds = 3 if cell.settings.get("rrhf_rank_weight") == 0 else 1
        assert [len(s) for s in cell_adapters(training, cell, 8).values()] == [seeds]


def test_the_configurations_are_the_product_of_the_lists_per_method() -> None:
    training = _training(selection={"learning_rates": [1e-3, 2e-3], "epochs": [1, 2, 4],
                                    "dpo_betas": [0.1, 2.0], "rrhf_rank_weights": [0.1, 1.0]})
    cells = {(c.split, c.name): c for c in experiment_matrix(training)}
    dpo = configurations(training, cells[("saturated", "dpo_self_judge")], 8)
    sft = configurations(training, cells[("saturated", "sft")], 8)
    rrhf = configurations(training, cells[("saturated", "rrhf_entropy")], 8)
    assert (len(dpo), len(sft), len(rrhf)) == (12, 6, 12)  # β only for DPO, λ only for σ-RRHF
    names = [c.name for c in dpo]
    assert len(set(names)) == 12 and "dpo_self_judge" in names  # the profile's own point
    assert "dpo_self_judge_beta2_lr0.002_ep4" in names
    settings = {c.name: c.training(training) for c in dpo}
    assert settings["dpo_self_judge_beta2_lr0.002_ep4"].dpo_beta == 2.0
    assert settings["dpo_self_judge_beta2_lr0.002_ep4"].learning_rate == 2e-3
    assert settings["dpo_self_judge_beta2_lr0.002_ep4"].epochs == 4


def test_a_sweep_row_keeps_what_it_fixes_and_shares_adapters_with_the_main_cell() -> None:
    training = _training(selection={"dpo_betas": [0.1, 2.0], "epochs": [1, 2]})
    cells = {(c.split, c.name): c for c in experiment_matrix(training)}
    row = cells[("strict_saturated", "dpo_self_judge_beta2")]  # Table 9: β=2 fixed
    assert [c.training(training).dpo_beta for c in configurations(training, row, 8)] == [2.0,
                                                                                          2.0]
    main = configurations(training, cells[("strict_saturated", "dpo_self_judge")], 8)
    shared = set(configurations(training, row, 8)) & set(main)
    assert {c.name for c in shared} == {"dpo_self_judge_beta2", "dpo_self_judge_beta2_ep1"}
    every = trained_adapters(training, list(cells.values()), 8)
    assert len(every) == len({(c.split, c.name) for c in every})  # each adapter once


def test_batch_sizes_a_method_cannot_use_are_skipped() -> None:
    training = _training(selection={"batch_sizes": [2, 8, 16]}, batch_size=8,
                         per_device_batch_size=8)
    cells = {(c.split, c.name): c for c in experiment_matrix(training)}
    rrhf = configurations(training, cells[("saturated", "rrhf_self_judge")], 8)
    sft = configurations(training, cells[("saturated", "sft")], 8)
    assert [c.training(training).batch_size for c in rrhf] == [8, 16]  # a question's n=8
    small = next(c.training(training) for c in sft if c.training(training).batch_size == 2)
    assert small.per_device_batch_size == 2  # lowered to fit the batch


def test_the_training_process_trains_each_configuration_as_the_graph_keys_it() -> None:
    """A selection batch below the per-device batch (the paper's 2 and 4 on 8): the settings the
    training process reads (``Experiment.training``, merged and validated once) carry the
    lowered per-device batch, so it trains the cell's settings instead of refusing 2 as not a
    multiple of 8, and survive the request's JSON."""
    from saturated_dag.config import TrainingSettings
    from saturated_dag.training.config import grad_accumulation, settings_record
    from saturated_dag.training.train import trainer_config

    training = _training(selection={"batch_sizes": [2, 4, 8, 16]}, batch_size=8,
                         per_device_batch_size=8)
    cells = [config for cell in experiment_matrix(training) if cell.method in ("sft", "dpo")
             for config in configurations(training, cell, 8)]
    assert {c.training(training).batch_size for c in cells} >= {2, 4}
    for cell in cells:
        child = TrainingSettings.model_validate_json(cell.training(training).model_dump_json())
        assert settings_record(cell.method, child) == settings_record(
            cell.method, cell.training(training))
        config = trainer_config(cell.method, child, "/nonexistent", "float32")
        assert config.gradient_accumulation_steps == grad_accumulation(child) >= 1


def test_replicates_are_seeds_and_replicate_zero_is_the_configuration() -> None:
    training = _training(replicates=3, seed=5)
    cell = experiment_matrix(training)[0]
    seeds = replicates(training, cell)
    assert seeds[0] == cell
    assert [s.training(training).seed for s in seeds] == [5, 6, 7]
    assert [s.name for s in seeds][1:] == [f"{cell.name}_seed6", f"{cell.name}_seed7"]


@pytest.mark.parametrize("selection", [{"epochs": [0, 2]}, {"learning_rates": [-1.0]},
                                       {"epochs": [2, 2]}, {"batch_sizes": []}])
def test_a_bad_selection_list_is_refused_naming_it(selection: dict) -> None:
    with pytest.raises(ProfileError, match="selection"):
        load_profile("demo", {"training": {"selection": selection}})


def test_selection_takes_the_best_mean_validation_and_the_first_of_equals() -> None:
    rows = [Trained("a", {"learning_rate": 1e-3}, [0.5, 0.7], [1, 2]),
            Trained("b", {"learning_rate": 2e-3}, [0.65, 0.65], [2, 2]),
            Trained("c", {"learning_rate": 3e-3}, [0.6, 0.6], [1, 1])]
    table = selection_table(rows)
    assert chosen(table) == "b"  # means 60, 65, 60
    assert table["validation pass@1"].to_list() == pytest.approx([60.0, 65.0, 60.0])
    tie = selection_table([rows[2], rows[0]])  # 60 and 60: the first listed
    assert chosen(tie) == "c" and tie["chosen"].sum() == 1
    with pytest.raises(ValueError, match="at least one"):
        selection_table([])
    with pytest.raises(ValueError, match="no validation"):
        selection_table([Trained("d", {}, [], [])])


OVERRIDES = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                  "strict_grid": None, "eval_questions_per_cell": 3},
    "sampling": {"n": 2, "max_new_tokens": 6},
    "training": {"splits": ["saturated"], "scorers": ["entropy"], "methods": ["sft"],
                 "epochs": 1, "batch_size": 2, "per_device_batch_size": 2,
                 "learning_rate": 1e-2, "max_length": 128, "lora_r": 4, "lora_alpha": 8,
                 "validation_questions_per_cell": 2, "isolate": False, "replicates": 2,
                 "selection": {"learning_rates": [1e-2, 1e-4]},
                 # a λ=0 row (Figure 6): a cell of its own, its learning rate chosen too,
                 # over as many seeds as the other rows here
                 "sweeps": {"rank_weight": {"split": "saturated", "scorer": "entropy",
                                            "values": [0.0], "zero_replicates": 2},
                            "rrhf_variants": None, "dpo_beta": None}},
}


def test_a_selected_cell_evaluates_the_chosen_configuration_over_its_seeds(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "out"
    store_pool_and_partitions(out)
    overrides = {**OVERRIDES, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, checks = graph("demo", overrides)
    keys = {a.key.to_user_string() for a in everything}
    # one adapter asset per cell, one Dagster partition per configuration x seed
    partitions = {a.key.to_user_string(): a.partitions_def.get_partition_keys()
                  for a in everything if "adapter" in a.key.path}
    expected = ["lr0.01_seed0", "lr0.01_seed1", "lr0.0001_seed0", "lr0.0001_seed1"]
    assert partitions == {"chain_sum/saturated/adapter/sft": expected,
                          "chain_sum/saturated/adapter/rrhf_entropy_lambda0": expected}
    assert "chain_sum/saturated/selection/sft" in keys
    wanted = [a.key for a in everything if a.key.path[0] == "chain_sum"
              and (a.key.path[1] in ("saturated", "eval", "results_table",
                                     "rank_weight_ablation")
                   or a.key.path[-1] == "entropy_scores")]
    result = materialize([*everything, *checks], selection=wanted,
                            resources=resources(out, "demo", overrides), raise_on_error=False)
    assert result.success

    table = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "selection", "sft"))
    # each configuration by its partition key without the seed, its seed-0 adapter by name
    assert table["configuration"].to_list() == ["lr0.01", "lr0.0001"]
    assert table["adapter"].to_list() == ["sft", "sft_lr0.0001"]
    assert table["seeds"].to_list() == [2, 2] and table["chosen"].sum() == 1
    # each row's validation pass@1 is the mean of its seeds' kept-epoch values
    for row in table.iter_rows(named=True):
        values = []
        for seed in ("", "_seed1"):
            record = json.loads((adapter_folder(out, f"{row['adapter']}{seed}")
                                 / "result.json").read_text())
            values += [e["val_pass@1"] for e in record["epochs"]
                       if e["epoch"] == record["best_epoch"]]
        assert row["validation pass@1"] == pytest.approx(100 * sum(values) / 2)
    assert row["learning_rate"] == 1e-4 and table["learning_rate"][0] == 1e-2

    weights = "adapter_model.safetensors"
    assert (adapter_folder(out, "sft") / weights).read_bytes() != (
        adapter_folder(out, "sft_seed1") / weights).read_bytes()  # another seed
    report = pl.read_parquet(asset_path(out, "chain_sum", "saturated", "eval", "sft"))
    assert sorted(report["training_replicate"].unique().to_list()) == [0, 1]
    events = {e.asset_key.to_user_string(): e.materialization.metadata
              for e in result.get_asset_materialization_events()}
    assert events["chain_sum/saturated/eval/sft"]["training replicates"].value == 2
    results = pl.read_parquet(asset_path(out, "chain_sum", "results_table"))
    assert results["training replicates"].to_list() == [1, 2]
    # one name per configuration on the cell's pages: its adapters' partition keys without
    # the seed, on the selection's page and the eval report's alike
    key = {"sft": "lr0.01", "sft_lr0.0001": "lr0.0001"}[chosen(table)]
    assert events["chain_sum/saturated/selection/sft"]["chosen"].value == key
    assert events["chain_sum/saturated/eval/sft"]["configuration"].value == key
    assert [events["chain_sum/saturated/eval/sft"][f"adapter (training replicate {i})"].value
            for i in (0, 1)] == [f"{key}_seed0", f"{key}_seed1"]
    assert f"**Chosen: {key}**" in events["chain_sum/saturated/selection/sft"]["summary"].value
    # the sweep's row names the configuration its cell chose, and that adapter's epoch
    row_choice = chosen(pl.read_parquet(asset_path(out, "chain_sum", "saturated", "selection",
                                                   "rrhf_entropy_lambda0")))
    sweep = pl.read_parquet(asset_path(out, "chain_sum", "rank_weight_ablation"))
    assert sweep["adapter"].to_list() == [None, row_choice]
    assert sweep["epochs"][1] == 1


def test_a_selection_that_names_no_configuration_fails_clearly() -> None:
    cell = Experiment("saturated", "sft", None, ("saturated", "sft_set"))
    table = selection_table([Trained(cell.name, {}, [0.5], [1])]).with_columns(
        chosen=pl.lit(False))
    with pytest.raises(ValueError, match="exactly one"):
        chosen(table)


def test_a_run_override_that_would_change_the_graphs_adapters_is_refused() -> None:
    from assets.selection import same_adapters
    from saturated_dag.experiments import cell_adapters

    profile = load_profile("demo")
    cell = experiment_matrix(profile.training)[0]
    trained = cell_adapters(profile.training, cell, profile.sampling.n)
    same_adapters(experiment_plan(profile)["chain_sum"], cell, trained)  # the location's own
    other = load_profile("demo", {"training": {"replicates": 2}})
    with pytest.raises(dg.Failure, match="shape the graph"):
        same_adapters(experiment_plan(other)["chain_sum"], cell, trained)
    # a run whose settings cannot train the cell's split at all is refused too
    no_strict = load_profile("demo", {"chain_sum": {"strict_grid": None}})
    strict = next(c for c in experiment_plan(profile)["chain_sum"].cells
                  if c.split == "strict_saturated")
    with pytest.raises(dg.Failure, match=r"the adapters \[\]"):
        same_adapters(experiment_plan(no_strict)["chain_sum"], strict,
                      experiment_plan(profile)["chain_sum"].trained[strict])
