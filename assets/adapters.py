"""``<task>/<split>/adapter/<cell>``: the LoRA adapters of one cell of the experiment matrix, one
Dagster partition per configuration x training seed (``adapter_partition_key``:
``lr0.0003_seed0``). A run over several partitions trains them in one step, one after another
(``BackfillPolicy.single_run``); the step's one materialisation, recorded for each of its
partitions, holds a table with a row per adapter, and each partition's own metadata. Each adapter
has its home, ``<output_dir>/adapters/<task>/<split>/<adapter name>``, with one folder per cache
key (``saturated_dag.training.folders``); a sweep row sharing a main cell's configuration finds
its adapter as a cache hit.

Training keeps the epoch with the best validation pass@1 (App. B), in its own process by default
(``training.isolate``, through Dagster Pipes): its log lines, metadata and data version (the
hash of the adapter's weights) come back into the run. The metadata states every setting, the
validation curve and the training log. The folder's ``README.md`` is a model card
(``saturated_dag.reporting.model_card``), rewritten when it changes, keeping its eval part
while it is about the same weights.
"""

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets._adapter_files import (
    adapter_curves_png,
    adapter_dir,
    adapter_home,
    adapter_key,
    adapter_work_dir,
)
from assets._draws import FRAMES_BY_DRAW, by_data_seed, dataset_mapping
from assets._keys import located
from assets._metadata import frame_table, image, output_file, summary_entry
from assets._priority import AFTER_TRAINING, TRAINING, priority
from assets._stages import policy_identity
from assets.versioning import code_version_of
from resources import ExperimentResource, InferenceResource
from resources.training import train_with_pipes
from saturated_dag.config import TrainingSettings
from saturated_dag.evaluation.reports import recorded_base_model
from saturated_dag.experiments import Adapter, Cell, chosen_recipe
from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.infra.shards import readable_digest
from saturated_dag.reporting.labels import scientific
from saturated_dag.reporting.model_card import CARD_FILE, adapter_facts, write_training_card
from saturated_dag.reporting.plots import adapter_curves
from saturated_dag.reporting.tracking import trainer_environment
from saturated_dag.training.config import (
    LOG_NAMES,
    settings_line,
    settings_record,
    settings_summary,
)
from saturated_dag.training.folders import (
    RESULT_FILE,
    cached_result,
    key_folder,
    record_current,
    retire_old_layout,
    weights_version,
)
from saturated_dag.training.request import TrainingRequest
from saturated_dag.training.resolve import adapter_cache_key, adapter_request
from saturated_dag.training.selection import chosen_rows


def _curve_table(epochs: list[dict], kept: int) -> dg.TableMetadataValue:
    """Validation pass@1 (%) after each epoch, epoch ``kept`` (the training's choice) marked."""
    frame = pl.DataFrame(
        {"epoch": [e["epoch"] for e in epochs], "step": [e["step"] for e in epochs],
         "validation pass@1 (%)": [None if e.get("val_pass@1") is None
                                   else 100 * e["val_pass@1"] for e in epochs],
         "kept": [e["epoch"] == kept for e in epochs]},
        schema={"epoch": pl.Int64, "step": pl.Int64, "validation pass@1 (%)": pl.Float64,
                "kept": pl.Boolean})
    return frame_table(frame)


LOG_ROWS = 25
"""At most this many rows of the training log in the metadata (evenly spaced, last kept)."""


LOG_HEADERS = {"reward margin": "rew. margin", "reward accuracy": "rew. acc.",
               "learning rate": "η"}
"""The training log's headers where they are shorter than the progress lines' names
(``training.config.LOG_NAMES``): the UI wraps no header, and the six columns of a DPO log
under the long names are wider than the UI's metadata panel on a laptop's window."""


def training_log_table(history: list[dict]) -> dg.TableMetadataValue | None:
    """Loss (and, for DPO, the reward margin and accuracy) per logged step, thinned to
    ``LOG_ROWS`` rows; the figure has every step."""
    rows = [h for h in history if "loss" in h]
    if not rows:
        return None
    stride = max(1, -(-len(rows) // LOG_ROWS))
    kept = rows[::stride] if rows[::stride][-1] is rows[-1] else [*rows[::stride], rows[-1]]
    columns = {"step": "step", "epoch": "epoch",
               **{key: LOG_HEADERS.get(name, name) for key, name in LOG_NAMES.items()}}
    present = [c for c in columns if any(c in h for h in kept)]
    frame = pl.DataFrame({columns[c]: [h.get(c) for h in kept] for c in present},
                         schema={columns[c]: pl.Int64 if c == "step" else pl.Float64
                                 for c in present})
    if "η" in frame.columns:  # 5.65e-5 as η is written, not 0.0 after rounding
        frame = frame.with_columns(pl.col("η").map_elements(
            lambda v: "0" if v == 0 else scientific(v), return_dtype=pl.String))
    return frame_table(frame, max_rows=LOG_ROWS + 1, decimals=4)


def _train(context: dg.AssetExecutionContext, inference: InferenceResource,
           requests: list[TrainingRequest], work: Path, isolate: bool
           ) -> tuple[dict[str, object], str]:
    """Train ``requests`` (the step's adapters that are not cache hits) with one load of the
    base model: through Dagster Pipes in one child process (default), or in this one. Each
    training publishes its adapter with its ``result.json``. The parent's engines are
    released first (one owner of the device). Returns what the child reported (Pipes) and
    the data version of the weights it trained (``folders.weights_version``)."""
    inference.release()
    if isolate:
        child = train_with_pipes(context, requests, work, inference)
        return child.metadata, child.data_version
    from saturated_dag.training.runner import policy_for, run_trainings

    records = run_trainings(requests, policy_for(requests), log=context.log.info)
    return {}, weights_version([r["weights_version"] for r in records])


def _description(cell: Cell, partitions: dict[str, Adapter]) -> str:
    text = f"LoRA adapters of cell {cell.name}: {cell.method} on the {cell.split} split"
    if cell.scorer:
        text += f", ranked by {cell.scorer}"
    if cell.fixed:
        text += " with " + ", ".join(f"{k}={v}" for k, v in cell.fixed.items())
    return (text + f". One Dagster partition per configuration and training seed "
            f"({len(partitions)}: {', '.join(list(partitions)[:4])}"
            f"{', ...' if len(partitions) > 4 else ''}); "
            "a run over several trains them in one step.")


LOADS_CHECK = "loads_and_generates"
LOADS_DESCRIPTION = ("Every adapter the run materialised loads on the base model and generates "
                     "text for a validation question (greedy, 32 tokens).")


@dataclass
class _Adapter:
    """One adapter of a step: its home, its cache key and key folder (``out``), and its
    record once trained."""

    exp: Adapter
    home: Path
    out: Path
    key: str
    planned: dict[str, Any]
    result: dict | None = None
    hit: bool = False


def _look_up(context: dg.AssetExecutionContext, experiment: ExperimentResource,
             inference: InferenceResource, task: str, exp: Adapter,
             data: pl.DataFrame) -> _Adapter:
    """The adapter's cache key, and its stored record when it is a cache hit."""
    profile = experiment.settings
    home = adapter_home(experiment.output_dir, task, exp)
    for old in retire_old_layout(home):
        context.log.info(f"removed {old}, an earlier layout's adapter folder (trained by "
                         "older code, never reused)")
    key = adapter_cache_key(profile, task, exp, code_version_of(context),
                            policy_identity(inference.policy_settings()), data)
    out = key_folder(home, key)
    planned = settings_record(exp.method, exp.training(profile.training))
    # the run's tags say what each of its adapters is trained with (the UI's run list)
    context.instance.add_run_tags(context.run_id, {
        f"saturated_dag/{task}/{exp.split}/adapter/{exp.name}":
            settings_line(exp.method, planned)})
    result, why = cached_result(out, key) if profile.stages.cache else (None, "no cache")
    if result is not None:
        context.log.info(f"cache hit: adapter {exp.name} {key[:12]} reused from {out}")
    elif why not in ("no trained adapter", "no cache"):
        context.log.warning(f"adapter {exp.name}: not reused ({why}); training again")
    return _Adapter(exp, home, out, key, planned, result, hit=result is not None)


def _train_missing(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                   inference: InferenceResource, task: str, cell: Cell,
                   adapters: list[_Adapter], frames: dict[int, pl.DataFrame]
                   ) -> tuple[dict[str, object], str | None]:
    """Train every adapter of the step that is not a cache hit, in one process with one
    base-model load; each then has its record. What the training child reported, and the
    data version of the weights it trained (None when it trained none).
    ``frames``: the training data of each data seed the step's adapters train on."""
    missing = [a for a in adapters if a.result is None]
    if not missing:
        return {}, None
    profile = experiment.settings
    settings = inference.policy_settings()
    work = adapter_work_dir(experiment.output_dir, task, cell)
    work.mkdir(parents=True, exist_ok=True)
    paths: dict[int, Path] = {}
    for draw in sorted({a.exp.data_seed for a in missing}):  # scratch copies for the child
        paths[draw] = work / ("data.parquet" if draw == 0 else f"data_{draw}.parquet")
        atomic_write_parquet(frames[draw], paths[draw])  # with its proof, for the child
    for a in missing:
        context.log.info(f"adapter {a.exp.name} trains with: "
                         f"{settings_line(a.exp.method, a.planned)}")
    tags = {"saturated_dag.profile": profile.name, "saturated_dag.task": task}
    requests = [adapter_request(profile, task, a.exp, settings, paths[a.exp.data_seed], a.out,
                                a.key, trainer_environment(
                                    profile.tracking, experiment.output_dir,
                                    {**tags, "saturated_dag.adapter": a.exp.name}))
                for a in missing]
    reported = _train(context, inference, requests, work, profile.training.isolate)
    for a in missing:  # written by the training, beside the weights it hashes
        a.result = json.loads((a.out / RESULT_FILE).read_text())
    shutil.rmtree(work, ignore_errors=True)  # kept only when training fails
    return reported


def folder_entries(home: Path, out: Path, output_dir: str) -> dict[str, object]:
    """Where an adapter is, as three short entries: the folder of its split's adapters
    (relative to the output folder), its home's name there (the adapter's name across cells:
    a sweep row may reuse a main cell's adapter) and its key folder inside that (the cache
    key's). Why not one path: a browser breaks no line inside a path, and a key folder's
    (``adapters/chain_sum/hard/dpo_correctness_random/fb815f8f9239c102``) is wider than the
    value column of the UI's metadata panel on a laptop's window."""
    return {"folder": output_file(home.parent, output_dir),
            "adapter folder": dg.MetadataValue.path(home.name),
            "key folder": dg.MetadataValue.path(out.name)}


def _adapter_metadata(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                      inference: InferenceResource, task: str, cell: Cell, partition: str,
                      a: _Adapter, data: pl.DataFrame) -> tuple[dict[str, object], str]:
    """One trained adapter's metadata (and its model card, rewritten when it changed) and
    its data version, the hash of its weights. The page and its figure name the adapter by
    its partition key, as the cell's adapters table, its selection and its eval report do;
    its folder entries (``folder_entries``) carry the name it has across cells."""
    profile = experiment.settings
    exp, out, result = a.exp, a.out, a.result
    assert result is not None
    history = result["log_history"]
    losses = [h["loss"] for h in history if "loss" in h]
    record = json.loads((out / "training_config.json").read_text())
    best = next((e for e in result["epochs"] if e["epoch"] == result["best_epoch"]), {})
    # whose entries these are, what it reached, then what it was trained with (as
    # training_config.json records it), then on what: its settings within the page's first
    # two screens on a laptop's window, below the step's summary and adapters table
    metadata: dict[str, object] = {
        "partition": partition,
        "best epoch": result["best_epoch"],
        **({"best validation pass@1 (%)": round(100 * best["val_pass@1"], 2)}
           if best.get("val_pass@1") is not None else {}),
        "final train loss": round(losses[-1], 4) if losses else None,
        **settings_summary(exp.method, record.get("settings", a.planned)),
        "precision": record.get("precision", ""),
        "method": exp.method, "scorer": exp.scorer or "none", "split": exp.split,
        "training set": "/".join([task, *exp.dataset]), "training rows": data.height,
        "validation curve": _curve_table(result["epochs"], result["best_epoch"]),
    }
    log_table = training_log_table(history)
    if log_table is not None:
        metadata["training log"] = log_table
    png, _ = adapter_curves(result["epochs"], history,
                            adapter_curves_png(experiment.output_dir, task, exp),
                            f"{task} {exp.split}/{cell.name}: {partition}",
                            kept_epoch=result["best_epoch"])
    metadata["training curves"] = image(png, "loss per logged step, validation pass@1 per "
                                        "epoch (the kept epoch starred), DPO's reward margin")
    metadata.update({  # where it is and how it was made: below the science
        **folder_entries(a.home, out, experiment.output_dir),
        "overrides of the profile": dg.MetadataValue.json({**dict(exp.overrides),
                                                           **dict(exp.recipe)}),
        "isolated_process": profile.training.isolate,
        "cache": "hit" if a.hit else "miss", "cache_key": readable_digest(a.key)})
    # the weights' hash, as the training recorded it (a cache hit has just checked it
    # against the file: ``folders.cached_result``), not read and hashed once more
    version = result["weights_version"]
    # the asset and partition that materialised it (its cell's: an adapter of a configuration
    # other than the cell's own has no asset named after it)
    where = f"{located(profile, adapter_key(task, cell)).to_user_string()}, partition {partition}"
    identity = {"name": exp.name, "asset_key": where,
                "task": task, "split": exp.split, "method": exp.method, "scorer": exp.scorer,
                "training_data": "/".join([task, *exp.dataset]), "training_rows": data.height,
                "base_model": recorded_base_model(out),
                "base_model_spec": inference.policy_settings().model}
    card = adapter_facts(identity, record, result,
                         settings_summary(exp.method, record["settings"]),
                         len(experiment.plan[task].questions.validation))
    if write_training_card(out, card):
        context.log.info(f"wrote the model card {out / CARD_FILE}")
    metadata["model card"] = f"{CARD_FILE} in the key folder"
    metadata["weights hash (data version)"] = readable_digest(version)
    metadata["base model (adapter_config.json)"] = card.base_model
    return metadata, version


PARTITION_COLUMNS = {"cache": "cache", "best epoch": "epoch kept",
                     "best validation pass@1 (%)": "val. pass@1 (%)"}
"""The step's table: one row per adapter it materialised, named by its partition key (the
settings its selection varies), narrow enough for the UI's metadata panel. The adapter's own
name is on its partition's page: as a column it would push the table past the panel."""


def partitions_table(done: list[tuple[str, dict[str, object], str]]) -> dg.TableMetadataValue:
    """The adapters one step materialised, a row each: partition (partition key: the settings the
    selection varies, and the seed), cache, kept epoch and its validation pass@1 (the
    partition's page names the adapter and links its folder, which holds its model card, with
    every setting and the final loss, and its curves)."""
    def plain(value: object) -> object:
        return getattr(value, "value", value)

    frame = pl.DataFrame(
        [{"partition": p, **{shown: plain(m.get(c)) for c, shown in PARTITION_COLUMNS.items()}}
         for p, m, _ in done],
        schema={"partition": pl.String, "cache": pl.String,
                "epoch kept": pl.Int64, "val. pass@1 (%)": pl.Float64})
    return frame_table(frame, max_rows=max(25, len(done)), decimals=2)


def partitions_summary(cell: Cell, done: list[tuple[str, dict[str, object], str]],
                       selected: bool) -> str:
    """The step's answer first: how many adapters, trained or reused, and the highest and
    lowest validation pass@1 among them (the spread the selection chooses from; ties named, so
    the highest is not read as the selection's choice). With several partitions it says whose
    settings the entries below the table are (the last partition the step materialised, which
    the Overview shows) and where the choice is (``selected``: the cell has a selection)."""
    scored = [(m.get("best validation pass@1 (%)"), p) for p, m, _ in done
              if m.get("best validation pass@1 (%)") is not None]
    trained = sum(m["cache"] == "miss" for _, m, _ in done)
    text = (f"**{cell.split}/{cell.name}: {len(done)} adapter{'s' * (len(done) != 1)}** "
            f"({trained} trained, {len(done) - trained} reused).")
    if scored:
        top, low = max(v for v, _ in scored), min(v for v, _ in scored)
        tops = [p for v, p in scored if v == top]
        lows = [p for v, p in scored if v == low]
        text += (f" Highest validation pass@1 {top:.2f}% ({', '.join(tops)})" + (
            f", lowest {low:.2f}% ({', '.join(lows)}): a spread of {top - low:.2f} points."
            if top != low else "." if len(scored) == 1 else ": every partition alike."))
    if len(done) > 1:
        text += (f" The entries below the table are partition {done[-1][0]}'s, the last this "
                 "step materialised, not a choice: " + (
                     f"the selection's choice is on `{cell.split}/selection/{cell.name}`."
                     if selected else "each partition's page holds its own."))
    return text + " Each partition's page holds its adapter's settings, curves and card."


def step_version(done: list[tuple[str, dict[str, object], str]],
                 trained: str | None) -> str:
    """The step's data version: the weights' data version of its adapters, in partition order
    (``folders.weights_version``). ``trained``: the version the training reported for the
    adapters it trained; when it trained every adapter of the step, that is the version recorded
    (and it must be the one the adapters' records give)."""
    version = weights_version([v for _, _, v in done])
    if trained is not None and trained != version and len(done) == len(
            [m for _, m, _ in done if m.get("cache") == "miss"]):
        raise dg.Failure(f"the training reported data version {trained[:12]} for this step's "
                         f"adapters, their records give {version[:12]}")
    return version


@dataclass(frozen=True)
class RecipeSource:
    """Where a ``recipe_from`` cell's recipe comes from: its recipe cell, and that cell's
    selection asset (None when it has one configuration: the recipe is its own settings)."""

    cell: Cell
    selection: dg.AssetKey | None


def _chosen_recipe(training: TrainingSettings, source: Cell, method: str,
                   table: pl.DataFrame | None, fixed: Iterable[str] = ()) -> dict[str, Any]:
    """``experiments.chosen_recipe`` on ``table`` (the recipe cell's selection, or None), a
    refusal as the step's failure."""
    try:
        return chosen_recipe(training, source, method, chosen_rows(table), fixed)
    except ValueError as err:
        raise dg.Failure(str(err)) from None


def _adapter_asset(task: str, cell: Cell, partitions: dict[str, Adapter],
                   check_in_step: bool, source: RecipeSource | None = None,
                   by_draw: bool = False) -> dg.AssetsDefinition:
    key = adapter_key(task, cell)
    # with several data seeds the dataset has one partition per draw: each adapter's partition key
    # maps to its draw's, and the step receives every draw it trains on, by partition key
    ins = {"data": dg.AssetIn(key=[task, *cell.dataset]) if not by_draw else
           dg.AssetIn(key=[task, *cell.dataset], partition_mapping=dataset_mapping(partitions),
                      dagster_type=FRAMES_BY_DRAW)}
    if source is not None and source.selection is not None:
        # the recipe is an input: the lineage shows which selection this cell trains
        ins["recipe"] = dg.AssetIn(key=source.selection)

    @dg.asset(
        key=key, group_name=f"{task}_{cell.split}",
        partitions_def=dg.StaticPartitionsDefinition(list(partitions)),
        backfill_policy=dg.BackfillPolicy.single_run(),  # a cell's adapters: one step, one process
        pool="gpu", op_tags=priority(TRAINING),
        kinds={"lora", "peft", "pytorch"},  # "lora": the graph node's badge
        ins=ins, deps=["base_model"],
        description=_description(cell, partitions),
        check_specs=[dg.AssetCheckSpec(LOADS_CHECK, asset=key, blocking=True,
                                       description=LOADS_DESCRIPTION)] if check_in_step else None,
    )
    def adapter(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                inference: InferenceResource, data: Any,
                **recipe_input: pl.DataFrame) -> dg.MaterializeResult:
        keys = list(context.partition_keys)
        context.log.info(f"{cell.split}/{cell.name}: {len(keys)} of its {len(partitions)} adapters "
                         f"in this step: {', '.join(keys)}")
        recipe: dict[str, Any] = {}
        if source is not None:
            recipe = _chosen_recipe(experiment.settings.training, source.cell, cell.method,
                                   recipe_input.get("recipe"), cell.fixed)
            context.log.info(f"{cell.split}/{cell.name} trains the recipe chosen on "
                             f"{source.cell.name}: {recipe or 'the profile settings'}")
        frames = by_data_seed(data)
        adapters = [_look_up(context, experiment, inference, task,
                             partitions[partition].with_recipe(recipe),
                             frames[partitions[partition].data_seed])
                    for partition in keys]
        reported, trained = _train_missing(context, experiment, inference, task, cell,
                                           adapters, frames)
        for a in adapters:  # what the eval reports, selection and tables now read
            for old in record_current(a.home, a.out):
                context.log.info(f"adapter {a.exp.name}: removed {old.name}, trained under "
                                 "an earlier cache key")
        done = [(partition, *_adapter_metadata(context, experiment, inference, task, cell,
                                               partition, a,
                                               frames[a.exp.data_seed]))
                for partition, a in zip(keys, adapters, strict=True)]
        # One materialisation for the step, which Dagster records for each of its partitions:
        # the step's summary and adapters table for all, and each partition's own record (every
        # setting, the curves, the kept epoch, the weights hash, the model card) as that
        # partition's metadata (``add_asset_metadata``), so a partition's page is its
        # adapter's page.
        for partition, metadata, _ in done:
            context.add_asset_metadata(metadata, partition_key=partition)
        summary: dict[str, object] = {"summary": summary_entry(partitions_summary(
            cell, done, selected=source is None and len(
                {tuple(o for o in a.overrides if o[0] != "seed")
                 for a in partitions.values()}) > 1)),
                                      "adapters": partitions_table(done)}
        if source is not None:
            summary["recipe"] = dg.MetadataValue.json(
                {"chosen on": source.cell.name, **recipe})
        summary["adapter folders"] = output_file(
            adapter_home(experiment.output_dir, task, cell).parent, experiment.output_dir)
        summary.update(reported)  # the training child's: seconds, base-model loads
        checks = ([loads_and_generates(experiment, inference, task,
                                       [partitions[partition] for partition in keys])]
                  if check_in_step else [])
        return dg.MaterializeResult(metadata=summary,
                                    data_version=dg.DataVersion(step_version(done, trained)),
                                    check_results=checks)

    return adapter


def adapter_assets(task: str, by_cell: dict[Cell, dict[str, Adapter]],
                   check_in_step: bool = False,
                   sources: dict[Cell, RecipeSource] | None = None,
                   by_draw: bool = False) -> list[dg.AssetsDefinition]:
    """One asset per cell, one Dagster partition per adapter (``by_cell``: each cell's
    ``TaskPlan.partitions``). ``check_in_step``: its ``loads_and_generates`` check runs at the end
    of the step (on CPU, where each step is a process of its own and a separate check step would
    cost a process start, ``jobs/executor.py``); otherwise it is a step of its own
    (``adapter_checks``), ordered after every training so that on a GPU the policy's engine is not
    restarted between trainings (``assets/_priority.py``). ``by_draw``: the datasets have one
    partition per data seed (``assets/_draws.py``)."""
    return [_adapter_asset(task, cell, partitions, check_in_step, (sources or {}).get(cell),
                           by_draw)
            for cell, partitions in by_cell.items()]


def _loads_one(experiment: ExperimentResource, inference: InferenceResource, task: str,
               exp: Adapter) -> dict[str, object]:
    """Load one adapter on the policy and generate 32 greedy tokens for a validation
    question: a row of the check's table (``error`` empty when it worked)."""
    from saturated_dag.evaluation.reports import adapter_backends
    from saturated_dag.generation.base import SamplingParams

    settings = inference.policy_settings()
    folder = adapter_dir(experiment.output_dir, task, exp)
    question = experiment.plan[task].questions.validation[0]
    backend = None
    row: dict[str, object] = {"adapter": exp.name, "question": question.question_id,
                              "generated tokens": 0, "text": "", "error": ""}
    try:
        backend = adapter_backends(inference.policy_backend(), {exp.name: folder},
                                   base_model=settings.model, dtype=settings.dtype,
                                   device=settings.device)[exp.name]
        prompt = backend.render(question.prompt_text)
        (sample,) = backend.sample([prompt], SamplingParams(n=1, temperature=0.0,
                                                            max_new_tokens=32))[0]
        row.update({"generated tokens": sample.num_tokens, "text": sample.text[:200]})
    except Exception as err:  # the check reports any failure to load or generate
        row["error"] = f"{type(err).__name__}: {err}"
    finally:
        if backend is not None:
            backend.close()  # a merged copy on transformers; a no-op view on vLLM
    return row


def loads_and_generates(experiment: ExperimentResource, inference: InferenceResource,
                        task: str, adapters: list[Adapter]) -> dg.AssetCheckResult:
    """Each adapter loads on the policy and generates; any failure to load or generate is a
    failed check (its row says which and why), not an error."""
    rows = [_loads_one(experiment, inference, task, exp) for exp in adapters]
    failed = [r["adapter"] for r in rows if r["error"] or not r["generated tokens"]]
    return dg.AssetCheckResult(
        check_name=LOADS_CHECK, passed=not failed,
        metadata={"adapters": len(rows), "failed": ", ".join(map(str, failed)) or "none",
                  "adapter_dir": str(adapter_dir(experiment.output_dir, task, adapters[0])),
                  "table": frame_table(pl.DataFrame(rows, schema={
                      "adapter": pl.String, "question": pl.String,
                      "generated tokens": pl.Int64, "text": pl.String, "error": pl.String}))})


def run_partitions(context: dg.AssetCheckExecutionContext, partitions: dict[str, Adapter]
                   ) -> list[str]:
    """The partition keys a run targets, from its partition tags (one key or a range in partition
    order); every key when the run names none."""
    tags = context.run.tags
    keys = list(partitions)
    if "dagster/partition" in tags:
        return [tags["dagster/partition"]]
    first, last = (tags.get("dagster/asset_partition_range_start"),
                   tags.get("dagster/asset_partition_range_end"))
    if first in partitions and last in partitions:
        return keys[keys.index(first):keys.index(last) + 1]
    return keys


def _loads_check(task: str, cell: Cell, partitions: dict[str, Adapter]
                 ) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=adapter_key(task, cell), name=LOADS_CHECK, blocking=True,
                    op_tags=priority(AFTER_TRAINING), description=LOADS_DESCRIPTION)
    def check(context: dg.AssetCheckExecutionContext, experiment: ExperimentResource,
              inference: InferenceResource) -> dg.AssetCheckResult:
        return loads_and_generates(experiment, inference, task,
                                   [partitions[k] for k in run_partitions(context, partitions)])

    return check


def adapter_checks(task: str, by_cell: dict[Cell, dict[str, Adapter]]
                   ) -> list[dg.AssetChecksDefinition]:
    """The separate check steps of ``adapter_assets(check_in_step=False)``."""
    return [_loads_check(task, cell, partitions) for cell, partitions in by_cell.items()]
