"""Datasets -> adapters -> eval reports -> results table, as Dagster assets on a tiny model.

The generation pool and its partitions are seeded into the IO manager's folder (a synthetic
pool with saturated questions; a random-weight model saturates nothing), and the real
entropy-score asset runs on them.
"""

import json
from pathlib import Path

import dagster as dg
import datasets
import polars as pl

from saturated_dag.infra.atomic import atomic_write_parquet
from tests.pipeline import adapter_folder, graph, materialize, resources, seed_adapter_folder
from tests.scoring_data import eval_report, make_partitions, make_pool

OVERRIDES = {
    "chain_sum": {"grid": {"terms": [2, 2], "digits": [1, 1]}, "questions_per_cell": 2,
                  "strict_grid": None, "eval_questions_per_cell": 3},
    "sampling": {"n": 2, "max_new_tokens": 6},
    "training": {"splits": ["saturated"], "scorers": ["entropy"],
                 "methods": ["dpo", "rrhf", "sft", "raft"], "epochs": 1, "batch_size": 2,
                 "per_device_batch_size": 2, "learning_rate": 1e-2, "max_length": 128,
                 "lora_r": 4, "lora_alpha": 8, "validation_questions_per_cell": 2,
                 "isolate": False, "selection": {"learning_rates": None}},
}


def test_matrix_cell_trains_evaluates_and_tabulates(tmp_path: Path, tiny_model_dir: Path) -> None:
    store = tmp_path / "out" / "assets"
    pool = make_pool()
    atomic_write_parquet(pool, store / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool),
                         store / "chain_sum" / "difficulty_partitions.parquet")
    overrides = {**OVERRIDES, "policy": {"model": str(tiny_model_dir), "batch_size": 8}}
    everything, checks = graph("demo", overrides)
    wanted = [a.key for a in everything
              if a.key.path[0] == "chain_sum"
              and (a.key.path[1] in ("saturated", "eval", "results_table", "behaviour")
                   or a.key.path[-1] == "entropy_scores")]
    run_resources = resources(tmp_path / "out", "demo", overrides)
    instance = dg.DagsterInstance.ephemeral()
    result = materialize([*everything, *checks], selection=wanted, instance=instance,
                         resources=run_resources, raise_on_error=False)
    evaluations = result.get_asset_check_evaluations()
    assert result.success, [(e.asset_key, e.metadata) for e in evaluations if not e.passed]
    checks = {(e.asset_key.path[-1], e.check_name): e.passed for e in evaluations}
    assert checks[("sft", "loads_and_generates")] and checks[("dpo_entropy", "loads_and_generates")]
    assert checks[("entropy", "chosen_differs_from_rejected")]
    assert all(checks.values()) and len(checks) >= 5, checks
    for name in ("dpo_entropy", "rrhf_entropy", "sft", "raft_entropy"):
        adapter = adapter_folder(tmp_path / "out", name)
        assert (adapter / "adapter_config.json").is_file()
        record = json.loads((adapter / "training_config.json").read_text())
        assert record["best_epoch"] == 1 and "val_pass@1" in record["epochs"][0]
        assert (adapter.parent.parent / f"{name}_curves.png").is_file()
    pairs = pl.read_parquet(store / "chain_sum" / "saturated" / "dpo_pairs" / "entropy.parquet")
    assert set(pairs["question_id"]) == {"q_sat1", "q_sat2"}
    raft = pl.read_parquet(store / "chain_sum" / "saturated" / "raft_set" / "entropy.parquet")
    assert raft.height == 2  # the argmax completion of each saturated question
    report = pl.read_parquet(store / "chain_sum" / "saturated" / "eval" / "sft.parquet")
    # every sample kept: 3 questions x n=2, each with its completion, answer and verdict
    assert report.height == 6 and report["question_id"].n_unique() == 3
    assert report.group_by("question_id").len()["len"].to_list() == [2, 2, 2]
    assert report["completion"].null_count() == 0 and report["correct"].dtype == pl.Boolean
    loaded = datasets.load_dataset(
        "parquet", data_files=str(store / "chain_sum" / "saturated" / "eval" / "sft.parquet"),
        split="train", cache_dir=str(tmp_path / "hf"))
    assert loaded.num_rows == 6 and loaded.column_names == report.columns
    table = pl.read_csv(tmp_path / "out" / "chain_sum" / "results_table.csv")
    assert table["method"].to_list() == ["Base model", "DPO", "σ-RRHF", "SFT", "RAFT"]
    assert table.select("pass@1", "pass@2").null_count().sum_horizontal().item() == 0
    assert table["Δ pass@1"][0] == 0.0
    behaviour = pl.read_parquet(store / "chain_sum" / "behaviour.parquet")
    assert set(behaviour["row"]) == {"base model", "saturated/dpo_entropy",
                                     "saturated/rrhf_entropy", "saturated/sft",
                                     "saturated/raft_entropy"}
    assert (tmp_path / "out" / "chain_sum" / "behaviour.png").is_file()
    assert not (tmp_path / "out" / "chain_sum" / "styles.csv").exists()  # a tiny random model

    # unchanged data, settings and code: the adapter is reused, and the metadata says so
    sft = dg.AssetKey(["chain_sum", "saturated", "adapter", "sft"])
    again = materialize(everything, selection=[sft], resources=run_resources)
    (event,) = again.get_asset_materialization_events()
    assert event.materialization.metadata["cache"].value == "hit"
    first = result.asset_materializations_for_node("chain_sum__saturated__adapter__sft")[0]
    assert first.metadata["cache"].value == "miss"
    assert first.metadata["cache_key"] == event.materialization.metadata["cache_key"]

    # issue 18: what each adapter was trained with, on its page and in the run's tags. The
    # DPO cell's configurations (β 0.1 and 2) train in one step: one row per adapter, each of its
    # partitions recorded with that step's materialisation
    dpo = result.asset_materializations_for_node("chain_sum__saturated__adapter__dpo_entropy")
    assert sorted(m.partition for m in dpo) == ["beta0.1_seed0", "beta2_seed0"]
    table = dpo[0].metadata["adapters"].value
    assert [r.data["partition"] for r in table.records] == ["beta0.1_seed0", "beta2_seed0"]
    # on its own page: named by its partition (whose entries these are, on the Overview
    # too), its folder by the adapter's name across cells
    assert {m.partition: (m.metadata["partition"].value, m.metadata["adapter folder"].value)
            for m in dpo} == {"beta0.1_seed0": ("beta0.1_seed0", "dpo_entropy"),
                              "beta2_seed0": ("beta2_seed0", "dpo_entropy_beta2")}
    assert all(r.data["epoch kept"] == 1 for r in table.records)
    assert "2 adapters" in dpo[0].metadata["summary"].value
    # each partition's own record: its β, not the other's
    betas = {m.partition: m.metadata["β (DPO)"].value for m in dpo}
    assert betas == {"beta0.1_seed0": 0.1, "beta2_seed0": 2.0}
    # a step of one adapter: the adapter's own metadata, its settings above where it lives
    (rrhf,) = result.asset_materializations_for_node("chain_sum__saturated__adapter__sft")
    metadata = rrhf.metadata
    assert metadata["learning rate"].value == 1e-2 and metadata["LoRA r"].value == 4
    assert metadata["epochs (max)"].value == 1 and "training log" in metadata
    keys = list(metadata)
    assert keys.index("learning rate") < keys.index("cache_key")
    card = (adapter_folder(tmp_path / "out", "dpo_entropy_beta2") / "README.md").read_text()
    assert "β (DPO)" in card and "| 2" in card
    tags = {k: v for run_id in result.run_ids
            for k, v in instance.get_run_by_id(run_id).tags.items()}
    line = tags["saturated_dag/chain_sum/saturated/adapter/dpo_entropy"]
    assert line.startswith("dpo · learning rate 0.01") and "β (DPO) 0.1" in line
    # an adapter's eval report: its Δ to the base model, with the paired interval
    report = result.asset_materializations_for_node("chain_sum__saturated__eval__sft")[0]
    delta = report.metadata["Δ pass@1"].value
    assert report.metadata["Δ pass@1 low"].value <= delta <= report.metadata[
        "Δ pass@1 high"].value


def _seed_reports(store: Path, keys: list[list[str]], question_ids: list[str]) -> None:
    """Eval reports (the IO manager's files, n=2 samples per question) for the given keys."""
    for i, key in enumerate(keys):
        report = eval_report({q: (2, (i + j) % 3) for j, q in enumerate(question_ids)},
                             cell="2x1")
        atomic_write_parquet(report, store.joinpath(*key[:-1]) / f"{key[-1]}.parquet")


def test_every_table_names_its_eval_set(tmp_path: Path) -> None:
    """Results table and sweep table: CSV column, Markdown caption and metadata `eval_set`;
    generated by default, the file's path with `chain_sum.eval_source`."""
    eval_file = tmp_path / "chainsum_eval.jsonl"
    eval_file.write_text("".join(json.dumps({"question": f"{a} + 1 =", "answer": str(a + 1)})
                                 + "\n" for a in (1, 2, 3)))
    base = {**OVERRIDES, "sampling": {"n": 2},
            "training": {**OVERRIDES["training"], "methods": ["rrhf"],
                         "sweeps": {"rank_weight": {"split": "saturated", "scorer": "entropy",
                                                    "values": [0.0, 1.0]},
                                    "rrhf_variants": None, "dpo_beta": None}}}
    fixed = {**base, "chain_sum": {**OVERRIDES["chain_sum"], "eval_source": str(eval_file)}}
    expected = {json.dumps(base): "generated: 3 per grid point over terms 2-2 x digits 1-1 "
                                  "(3 questions, seed 0)",
                json.dumps(fixed): f"{eval_file} (3 questions)"}
    for run, (overrides_json, name) in enumerate(expected.items()):
        overrides = json.loads(overrides_json)
        everything, _ = graph("demo", overrides)
        tables = [a.key for a in everything if a.key.path[0] == "chain_sum"
                  and a.key.path[-1] in ("results_table", "rank_weight_ablation")]
        reports = [a.key.path for a in everything
                   if a.key.path[0] == "chain_sum" and "eval" in a.key.path]
        out = tmp_path / f"run{run}" / "out"
        _seed_reports(out / "assets", reports, ["q1", "q2", "q3"])
        result = dg.materialize(everything, selection=tables,
                                resources=resources(out, "demo", overrides))  # no model loaded
        for table in ("results_table", "rank_weight_ablation"):
            csv = pl.read_csv(out / "chain_sum" / f"{table}.csv")
            assert set(csv["eval_set"]) == {name}
            assert f"Eval set: {name}\n" in (out / "chain_sum" / f"{table}.md").read_text()
            (event,) = [e for e in result.get_asset_materialization_events()
                        if e.asset_key.path[-1] == table]
            metadata = event.materialization.metadata
            assert metadata["eval_set"].value == name
            columns = [c.name for c in metadata["table"].value.schema.columns]
            assert "pass@1" in columns and "eval_set" not in columns  # a caption, not a column
            assert f"Eval set: {name}" in metadata["about the table"].value


def test_a_row_pinning_the_profiles_value_names_its_adapter_in_the_sweep_table(
        tmp_path: Path) -> None:
    """Table 9's β = 0.1 row, with DPO's β in the selection: its cell is
    ``dpo_entropy_beta0.1`` (it holds β = 0.1), its one configuration the adapter
    ``dpo_entropy``. The table names that adapter and its kept epoch."""
    overrides = {**OVERRIDES, "sampling": {"n": 2},
                 "training": {**OVERRIDES["training"], "methods": ["dpo"],
                              "selection": {"dpo_betas": [0.1, 2.0], "learning_rates": None},
                              "sweeps": {"rank_weight": None, "rrhf_variants": None,
                                         "dpo_beta": {"split": "saturated", "scorer": "entropy",
                                                      "betas": [0.1, 2.0],
                                                      "learning_rates": [1e-2]}}}}
    everything, _ = graph("demo", overrides)
    reports = [a.key.path for a in everything
               if a.key.path[0] == "chain_sum" and "eval" in a.key.path]
    assert ["chain_sum", "saturated", "eval", "dpo_entropy_beta0.1"] in reports
    out = tmp_path / "out"
    _seed_reports(out / "assets", reports, ["q1", "q2", "q3"])
    for name, epoch in (("dpo_entropy", 3), ("dpo_entropy_beta2", 2)):
        seed_adapter_folder(out, name, record={"best_epoch": epoch})
    table = [a.key for a in everything if a.key.path[-1] == "dpo_beta_sweep"]
    dg.materialize(everything, selection=table, resources=resources(out, "demo", overrides))
    csv = pl.read_csv(out / "chain_sum" / "dpo_beta_sweep.csv")
    assert csv["adapter"].to_list() == [None, "dpo_entropy", "dpo_entropy_beta2"]
    assert csv["epochs"].to_list() == [None, 3, 2]


def test_one_per_core_runs_the_adapter_check_inside_the_adapters_step(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    """With ``execution.model_steps: one_per_core`` (a process per step) the adapter's
    ``loads_and_generates`` check is a check spec of the adapter asset, evaluated at the end
    of its step, not an asset check of its own; its result is the same check."""
    store = tmp_path / "out" / "assets"
    pool = make_pool()
    atomic_write_parquet(pool, store / "chain_sum" / "generation_pool.parquet")
    atomic_write_parquet(make_partitions(pool),
                         store / "chain_sum" / "difficulty_partitions.parquet")
    training = {**OVERRIDES["training"], "methods": ["sft"]}
    overrides = {**OVERRIDES, "training": training,
                 "policy": {"model": str(tiny_model_dir), "batch_size": 8},
                 "execution": {"model_steps": "one_per_core"}}
    everything, checks = graph("demo", overrides)
    sft = dg.AssetKey(["chain_sum", "saturated", "adapter", "sft"])
    (asset,) = [a for a in everything if sft in a.keys]
    assert {k.name for k in asset.check_keys} == {"loads_and_generates"}
    assert not [c for c in checks if sft in {k.asset_key for k in c.check_keys}]
    result = materialize(everything, selection=[sft, dg.AssetKey(
        ["chain_sum", "saturated", "sft_set"])], instance=dg.DagsterInstance.ephemeral(),
        resources=resources(tmp_path / "out", "demo", overrides))
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.asset_key == sft]
    assert evaluation.check_name == "loads_and_generates" and evaluation.passed
    assert evaluation.metadata["adapters"].value == 1
    assert evaluation.metadata["failed"].value == "none"
