"""An adapter's model card (``README.md`` in its folder): what it is and, once evaluated, how
it did.

Why a card of our own: PEFT's ``save_pretrained`` leaves its empty template, which says
neither what the adapter was trained on nor how well it does, and names the base model by the
training machine's absolute path. This card is a huggingface_hub ``ModelCard`` whose YAML
metadata (``base_model``, ``library_name: peft``, ``tags``, the eval results as
``model-index``) Hub tooling reads, and whose Markdown says the same for a reader.

The card is a pure function (``render``) of two records, both kept in its own YAML under
``saturated_dag``: ``AdapterFacts`` (training: written by the adapter asset) and ``EvalFacts``
(written by the eval report asset once the adapter's report exists). Writing either part
re-renders the whole card from both, so writing the same facts again gives the same bytes
(the file is not even touched), and a rewrite of the training part keeps the eval part only
while it is about the same weights (a retrained adapter starts "not evaluated yet").

Pure core: no Dagster import, and no project import beyond the atomic write, so the adapter
asset that imports it does not change code version (and retrain) with the statistics or the
tables.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import polars as pl
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from saturated_dag.evaluation.reports import per_question_results
from saturated_dag.infra.atomic import atomic_write_text
from saturated_dag.methods import METHODS as TRAINING_METHODS
from saturated_dag.reporting.result_tables import results_table

CARD_FILE = "README.md"
CARD_KEY = "saturated_dag"
"""The YAML key holding the card's records (``adapter``, ``evaluation``)."""

METHODS = {m.name: m.description for m in TRAINING_METHODS.values()}
"""A sentence per training method, for the card's opening line."""


@dataclass(frozen=True)
class AdapterFacts:
    """What an adapter is, as its training decided it (the card's training part).

    ``base_model`` is the name ``adapter_config.json`` records (hub id or project-relative
    path); ``base_model_spec`` the profile's own name for it. ``hyperparameters`` are every
    trainer setting by its reader's name (``training.config.settings_summary``).
    ``validation_pass_at_1`` is the kept epoch's, in %; ``validation_curve`` has one
    ``{"epoch", "validation pass@1 (%)"}`` per epoch. ``weights_version`` is the hash of the
    weights (what an eval part must match to stay)."""

    name: str
    asset_key: str
    task: str
    split: str
    method: str
    scorer: str | None
    training_data: str
    training_rows: int
    base_model: str
    base_model_spec: str
    hyperparameters: dict[str, Any]
    seed: int
    max_epochs: int
    best_epoch: int
    validation_pass_at_1: float | None
    validation_questions: int
    validation_curve: list[dict[str, Any]]
    weights_version: str
    versions: dict[str, str]


def adapter_facts(identity: dict[str, Any], record: dict[str, Any], result: dict[str, Any],
                  hyperparameters: dict[str, Any], validation_questions: int) -> AdapterFacts:
    """The card's training part from what the training recorded (``record``:
    ``training_config.json``; ``result``: ``result.json``) and what the adapter is
    (``identity``: ``name``, ``asset_key``, ``task``, ``split``, ``method``, ``scorer``,
    ``training_data``, ``training_rows``, ``base_model``, ``base_model_spec``).
    ``hyperparameters``: the recorded settings by their readers' names
    (``training.config.settings_summary``); ``validation_questions``: how many selected the
    kept epoch."""
    settings = record["settings"]
    best = result["best_epoch"]
    curve = [{"epoch": e["epoch"], "validation pass@1 (%)":
              None if e.get("val_pass@1") is None else 100 * e["val_pass@1"]}
             for e in result["epochs"]]
    kept = next((e["validation pass@1 (%)"] for e in curve if e["epoch"] == best), None)
    return AdapterFacts(
        **identity, hyperparameters={**hyperparameters, "precision": record.get("precision", "")},
        seed=settings["seed"], max_epochs=settings["epochs"], best_epoch=best,
        validation_pass_at_1=kept, validation_questions=validation_questions,
        validation_curve=curve, weights_version=result["weights_version"],
        versions=record.get("versions", {}))


@dataclass(frozen=True)
class EvalFacts:
    """How an adapter did on the held-out eval set (the card's eval part).

    ``metrics`` maps ``pass@1``, ``pass@k`` and their ``Δ`` to the base model to
    ``[value, 95% low, 95% high]`` in %; ``samples`` is this adapter's sample count
    (questions x samples per question x eval replicates). ``report`` is the eval report's
    asset key; ``training_replicate`` which of that report's training seeds this adapter is."""

    report: str
    eval_set: str
    questions: int
    samples_per_question: int
    eval_replicates: int
    samples: int
    training_replicate: int
    metrics: dict[str, list[float]]
    weights_version: str


def _plain(record: Any) -> dict[str, Any]:
    """A record as the JSON-plain dict the YAML stores (tuples as lists, keys as strings), so
    a card rendered from facts and one rendered from facts read back are the same."""
    return json.loads(json.dumps(asdict(record)))


def _from(kind: type, stored: Any) -> Any:
    """``kind`` from its stored dict, or None when it is absent or from another layout (a card
    an older version wrote)."""
    if not isinstance(stored, dict) or set(stored) != {f.name for f in fields(kind)}:
        return None
    return kind(**stored)


def _number(value: float) -> str:
    return f"{value:.2f}"


def _interval(values: list[float]) -> str:
    return f"[{_number(values[1])}, {_number(values[2])}]"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _eval_results(adapter: AdapterFacts, evaluation: EvalFacts) -> list[EvalResult]:
    """pass@1 and pass@k as Hub eval results (``model-index``); the intervals and Δ are in
    the Markdown and the ``saturated_dag`` record."""
    return [EvalResult(task_type="text-generation", dataset_type=f"saturated-dag/{adapter.task}",
                       dataset_name=evaluation.eval_set, dataset_split="eval",
                       metric_type=metric, metric_name=f"{metric} (%)",
                       metric_value=round(values[0], 2),
                       metric_args={"samples_per_question": evaluation.samples_per_question})
            for metric, values in evaluation.metrics.items() if metric.startswith("pass@")]


def _training_text(adapter: AdapterFacts) -> list[str]:
    method = METHODS.get(adapter.method, adapter.method)
    ranked = f", completions ranked by the {adapter.scorer} scorer" if adapter.scorer else ""
    validation = ("none recorded" if adapter.validation_pass_at_1 is None else
                  f"{_number(adapter.validation_pass_at_1)}% on "
                  f"{adapter.validation_questions} validation questions")
    facts = [
        ["task", adapter.task], ["split", adapter.split],
        ["training data", f"`{adapter.training_data}` ({adapter.training_rows} rows)"],
        ["method", adapter.method], ["scorer", adapter.scorer or "none"],
        ["base model", f"`{adapter.base_model}` (profile: `{adapter.base_model_spec}`)"],
        ["seed", adapter.seed],
        ["epoch kept", f"{adapter.best_epoch} of {adapter.max_epochs} "
                       "(the best validation pass@1)"],
        ["validation pass@1", validation],
        ["weights version", f"`{adapter.weights_version}` (the adapter's data version)"],
    ]
    lines = [
        f"# {adapter.name}: a LoRA adapter of {adapter.base_model}", "",
        f"Trained with {method} on the {adapter.split} split of the {adapter.task} task"
        f"{ranked}: one adapter of the saturated-dag experiment matrix (asset "
        f"`{adapter.asset_key}`).", "",
        "## Training", "", _table(["", ""], facts), "",
        "### Hyperparameters", "",
        _table(["setting", "value"], [[k, v] for k, v in adapter.hyperparameters.items()]), "",
    ]
    if adapter.validation_curve:
        lines += ["### Validation pass@1 per epoch", "",
                  _table(["epoch", "validation pass@1 (%)", "kept"],
                         [[row["epoch"], "-" if row["validation pass@1 (%)"] is None
                           else _number(row["validation pass@1 (%)"]),
                           "yes" if row["epoch"] == adapter.best_epoch else ""]
                          for row in adapter.validation_curve]), ""]
    return lines


def _eval_text(adapter: AdapterFacts, evaluation: EvalFacts | None) -> list[str]:
    if evaluation is None:
        return ["## Evaluation", "",
                "Not evaluated yet: the eval report of this adapter's cell fills this section "
                "when it is materialised (only the configuration a cell's selection chose is "
                "evaluated).", ""]
    rows = [[f"{metric} vs the base model" if metric.startswith("Δ") else metric,
             _number(values[0]), _interval(values)]
            for metric, values in evaluation.metrics.items()]
    return ["## Evaluation", "",
            f"Eval set: {evaluation.eval_set}. {evaluation.questions} questions x "
            f"{evaluation.samples_per_question} samples x {evaluation.eval_replicates} eval "
            f"replicate(s) = {evaluation.samples} samples (eval report `{evaluation.report}`, "
            f"training replicate {evaluation.training_replicate}).", "",
            _table(["metric (%)", "value", "95% interval"], rows), "",
            "pass@k by the unbiased estimator; intervals by the bootstrap over questions, Δ is "
            "paired with the base model's report on the same questions (docs/statistics.md).",
            ""]


def _base_model_note(name: str) -> str | None:
    """What a reader must know to find the base model ``name`` (None: a hub id), by the
    forms ``generation.models.portable_model_name`` writes."""
    loader = ("`saturated_dag.evaluation.reports.adapter_backend(None, folder)` loads it from any "
              "working folder")
    if Path(name).is_absolute():
        return (f"`{name}` is a folder of the machine that trained the adapter (a model "
                "outside the project has no portable name): copy the model there first.")
    if "/" not in name:
        return f"`{name}` is a model saturated-dag ships or builds by that name: {loader}."
    if len(name.split("/")) > 2 or name.startswith("."):
        return (f"`{name}` is relative to the saturated-dag project root: run from there; "
                f"{loader}.")
    return None


def _loading_text(adapter: AdapterFacts) -> list[str]:
    note = _base_model_note(adapter.base_model)
    lines = ["## Loading", "", "```python",
             "from peft import PeftModel",
             "from transformers import AutoModelForCausalLM",
             "",
             f'base = AutoModelForCausalLM.from_pretrained("{adapter.base_model}")',
             'model = PeftModel.from_pretrained(base, "path/to/this/folder")',
             "```", ""]
    if note:
        lines += [note, ""]
    if adapter.versions:
        lines += ["### Framework versions", "",
                  *(f"- {name} {version}" for name, version in adapter.versions.items()), ""]
    return lines


def render(adapter: AdapterFacts, evaluation: EvalFacts | None = None) -> ModelCard:
    """The whole card from its two records (``evaluation`` None: not evaluated yet)."""
    tags = ["peft", "lora", "saturated-dag", adapter.task, adapter.split, adapter.method,
            *([adapter.scorer] if adapter.scorer else [])]
    data = ModelCardData(
        base_model=adapter.base_model, library_name="peft", pipeline_tag="text-generation",
        tags=list(dict.fromkeys(tags)), model_name=adapter.name,
        eval_results=_eval_results(adapter, evaluation) if evaluation else None,
        **{CARD_KEY: {"adapter": _plain(adapter),
                      "evaluation": None if evaluation is None else _plain(evaluation)}})
    text = [*_training_text(adapter), *_eval_text(adapter, evaluation),
            *_loading_text(adapter)]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(text))


def read_card(folder: Path) -> tuple[AdapterFacts | None, EvalFacts | None]:
    """The records of the card in ``folder``: (None, None) when there is none or it is not
    ours (PEFT's template)."""
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        return None, None
    stored = ModelCard.load(path, ignore_metadata_errors=True).data.to_dict().get(CARD_KEY)
    if not isinstance(stored, dict):
        return None, None
    return _from(AdapterFacts, stored.get("adapter")), _from(EvalFacts, stored.get("evaluation"))


def _save(folder: Path, card: ModelCard) -> bool:
    """Write ``card`` atomically unless the file already holds exactly it; whether it wrote."""
    path = Path(folder) / CARD_FILE
    content = str(card)
    if path.is_file() and path.read_text(encoding="utf-8") == content:
        return False
    atomic_write_text(path, content)
    return True


def write_training_card(folder: Path, adapter: AdapterFacts) -> bool:
    """Write the card of a trained adapter, keeping the eval part that is there when it
    evaluated these same weights. Returns whether the file changed."""
    _, evaluation = read_card(folder)
    if evaluation is not None and evaluation.weights_version != adapter.weights_version:
        evaluation = None  # about weights this folder no longer holds
    return _save(folder, render(adapter, evaluation))


class StaleCard(ValueError):
    """The adapter's card has no training part, or one about other weights."""


class CardOfAnotherAdapter(ValueError):
    """The card in an adapter's folder describes another adapter (a copied folder or card):
    filling it would put this adapter's results under that adapter's name."""


def eval_facts(samples: pl.DataFrame, base: pl.DataFrame, replicate: int, k: int,
               eval_set: str, report: str, weights_version: str) -> EvalFacts:
    """The model card's eval part of training replicate ``replicate``'s adapter: its own
    rows of the eval report ``samples`` against the base model's report ``base`` (pass@1,
    pass@k, their Δ, each with its 95% interval, as the results table computes them)."""
    own = samples.filter(pl.col("training_replicate") == replicate)
    frame = results_table(per_question_results(base),
                          {("adapter", "adapter", None): per_question_results(own)},
                          k=k, eval_set=eval_set)
    row = frame.row(frame.height - 1, named=True)
    names = [c for c in frame.columns if c.startswith("pass@") and " " not in c]
    metrics = {m: [float(row[f"{m}{end}"]) for end in ("", " low", " high")]
               for m in [*names, *(f"Δ {n}" for n in names)]}
    return EvalFacts(report=report, eval_set=eval_set, questions=int(row["questions"]),
                     samples_per_question=k, eval_replicates=own["replicate"].n_unique(),
                     samples=own.height, training_replicate=replicate, metrics=metrics,
                     weights_version=weights_version)


def write_eval_card(folder: Path, evaluation: EvalFacts,
                    adapter_of: tuple[str, str, str] | None = None) -> bool:
    """Fill the card's eval part (replacing an earlier one). Returns whether the file changed.

    The same result from another report is no change: an adapter shared by two cells (a
    sweep row pinned at the main cell's setting) is evaluated by both reports alike, and the
    card would otherwise flip between their names with every run.

    Raises ``StaleCard`` when the card has no training part (PEFT's template: the adapter
    asset has not written its card) or one about other weights than were evaluated, and
    ``CardOfAnotherAdapter`` when ``adapter_of`` (task, split, adapter name: what the reader
    evaluated) is not what the card's training part names."""
    adapter, previous = read_card(folder)
    if adapter is None:
        raise StaleCard(f"{Path(folder) / CARD_FILE} is not the adapter's card: "
                        "re-materialise the adapter to write it")
    found = (adapter.task, adapter.split, adapter.name)
    if adapter_of is not None and found != tuple(adapter_of):
        raise CardOfAnotherAdapter(
            f"{Path(folder) / CARD_FILE}: expected the card of {'/'.join(adapter_of)}, found "
            f"that of {'/'.join(found)}: re-materialise adapter {adapter_of[2]}")
    if adapter.weights_version != evaluation.weights_version:
        raise StaleCard(f"{Path(folder) / CARD_FILE} describes weights "
                        f"{adapter.weights_version[:12]}, but {evaluation.weights_version[:12]} "
                        "were evaluated: re-materialise the adapter")
    if previous is not None and replace(previous, report=evaluation.report) == evaluation:
        return False
    return _save(folder, render(adapter, evaluation))
