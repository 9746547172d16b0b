"""The adapter's model card (``saturated_dag.reporting.model_card``): a huggingface_hub card whose
YAML
Hub tooling reads, written idempotently, whose eval part follows the weights it is about."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, ModelCardData

from saturated_dag.reporting.model_card import (
    CARD_FILE,
    AdapterFacts,
    EvalFacts,
    StaleCard,
    read_card,
    write_eval_card,
    write_training_card,
)

ADAPTER = AdapterFacts(
    name="dpo_self_judge", asset_key="chain_sum/saturated/adapter/dpo_self_judge",
    task="chain_sum", split="saturated", method="dpo", scorer="self_judge",
    training_data="chain_sum/saturated/dpo_pairs/self_judge", training_rows=120,
    base_model="saturated_dag/models/arith_base", base_model_spec="arith-base",
    hyperparameters={"learning rate": 2e-05, "batch size": 8, "β (DPO)": 0.1,
                     "LoRA targets": "q_proj, v_proj", "precision": "float32"},
    seed=3, max_epochs=4, best_epoch=2, validation_pass_at_1=41.25, validation_questions=40,
    validation_curve=[{"epoch": 1, "validation pass@1 (%)": 38.5},
                      {"epoch": 2, "validation pass@1 (%)": 41.25}],
    weights_version="a" * 64, versions={"peft": "0.21.2"})
EVALUATION = EvalFacts(
    report="chain_sum/saturated/eval/dpo_self_judge", eval_set="chain_sum eval (24 questions)",
    questions=24, samples_per_question=8, eval_replicates=2, samples=384, training_replicate=0,
    metrics={"pass@1": [45.5, 40.25, 50.75], "pass@8": [70.0, 61.5, 78.0],
             "Δ pass@1": [3.25, -1.5, 8.0], "Δ pass@8": [1.0, -4.0, 6.0]},
    weights_version="a" * 64)


def test_a_training_card_says_what_the_adapter_is_and_hub_tooling_reads_it(
        tmp_path: Path) -> None:
    assert write_training_card(tmp_path, ADAPTER)
    card = ModelCard.load(tmp_path / CARD_FILE)
    data = card.data.to_dict()
    assert data["base_model"] == "saturated_dag/models/arith_base"
    assert data["library_name"] == "peft" and data["pipeline_tag"] == "text-generation"
    assert {"peft", "lora", "dpo", "self_judge", "chain_sum", "saturated"} <= set(data["tags"])
    assert "model-index" not in data  # no eval results before the eval report
    text = card.text
    for fact in ("chain_sum/saturated/dpo_pairs/self_judge", "(120 rows)", "self_judge",
                 "| seed | 3 |", "2 of 4", "41.25% on 40 validation questions",
                 "| β (DPO) | 0.1 |", "| learning rate | 2e-05 |", "| precision | float32 |",
                 "Not evaluated yet", "- peft 0.21.2",
                 "relative to the saturated-dag project root"):
        assert fact in text, fact
    assert read_card(tmp_path) == (ADAPTER, None)


def test_writing_the_same_card_again_changes_nothing(tmp_path: Path) -> None:
    assert write_training_card(tmp_path, ADAPTER)
    assert write_eval_card(tmp_path, EVALUATION)
    path = tmp_path / CARD_FILE
    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    assert not write_eval_card(tmp_path, EVALUATION)
    assert not write_training_card(tmp_path, ADAPTER)  # keeps the eval part: same weights
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stamp


def test_the_eval_part_gives_pass_at_k_with_intervals_and_model_index(tmp_path: Path) -> None:
    write_training_card(tmp_path, ADAPTER)
    write_eval_card(tmp_path, EVALUATION)
    card = ModelCard.load(tmp_path / CARD_FILE)
    results = {r.metric_type: r for r in card.data.eval_results}
    assert set(results) == {"pass@1", "pass@8"}
    assert results["pass@1"].metric_value == 45.5
    assert results["pass@1"].dataset_name == "chain_sum eval (24 questions)"
    for line in ("| pass@1 | 45.50 | [40.25, 50.75] |", "| pass@8 | 70.00 | [61.50, 78.00] |",
                 "| Δ pass@1 vs the base model | 3.25 | [-1.50, 8.00] |",
                 "24 questions x 8 samples x 2 eval replicate(s) = 384 samples",
                 "chain_sum/saturated/eval/dpo_self_judge"):
        assert line in card.text, line
    assert "Not evaluated yet" not in card.text
    # a later report (more replicates) replaces the part, never adds a second one
    later = replace(EVALUATION, eval_replicates=3, samples=576,
                    metrics={**EVALUATION.metrics, "pass@1": [46.0, 41.0, 51.0]})
    assert write_eval_card(tmp_path, later)
    text = (tmp_path / CARD_FILE).read_text()
    assert text.count("## Evaluation") == 1 and "| pass@1 | 46.00 | [41.00, 51.00] |" in text
    assert read_card(tmp_path) == (ADAPTER, later)


def test_retrained_weights_drop_the_old_eval_part(tmp_path: Path) -> None:
    write_training_card(tmp_path, ADAPTER)
    write_eval_card(tmp_path, EVALUATION)
    retrained = replace(ADAPTER, weights_version="b" * 64, best_epoch=3)
    assert write_training_card(tmp_path, retrained)
    assert read_card(tmp_path) == (retrained, None)
    assert "Not evaluated yet" in (tmp_path / CARD_FILE).read_text()
    with pytest.raises(StaleCard, match="were evaluated"):  # the old weights' report
        write_eval_card(tmp_path, EVALUATION)


def test_an_eval_part_needs_the_adapters_own_card(tmp_path: Path) -> None:
    """PEFT's template (what save_pretrained leaves) has no training part to add to."""
    ModelCard.from_template(ModelCardData(library_name="peft")).save(tmp_path / CARD_FILE)
    assert read_card(tmp_path) == (None, None)
    with pytest.raises(StaleCard, match="re-materialise the adapter"):
        write_eval_card(tmp_path, EVALUATION)


def test_the_card_says_how_to_find_each_form_of_base_model(tmp_path: Path) -> None:
    qwen = "Qwen/Qwen3-1.7B-Base"
    hub = replace(ADAPTER, base_model=qwen, base_model_spec=qwen)
    write_training_card(tmp_path, hub)
    text = (tmp_path / CARD_FILE).read_text()
    assert 'from_pretrained("Qwen/Qwen3-1.7B-Base")' in text
    assert "project root" not in text and "machine that trained" not in text
    local = replace(ADAPTER, base_model="/data/models/mine", base_model_spec="/data/models/mine")
    write_training_card(tmp_path, local)
    assert "a folder of the machine that trained the adapter" in (tmp_path / CARD_FILE).read_text()


def test_the_same_result_from_another_report_leaves_the_card_alone(tmp_path: Path) -> None:
    """A sweep row pinned at the main cell's setting evaluates the main cell's adapter too:
    its equal result must not make the card flip between the two reports' names."""
    write_training_card(tmp_path, ADAPTER)
    write_eval_card(tmp_path, EVALUATION)
    twin = replace(EVALUATION, report="chain_sum/saturated/eval/dpo_self_judge_beta0.1")
    assert not write_eval_card(tmp_path, twin)
    assert read_card(tmp_path)[1] == EVALUATION
    other = replace(twin, eval_replicates=3, samples=576)  # a different result: it is written
    assert write_eval_card(tmp_path, other)
    assert read_card(tmp_path)[1] == other
