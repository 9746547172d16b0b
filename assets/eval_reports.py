"""``<task>/eval/base`` and ``<task>/<split>/eval/<adapter>``: pass@1 and pass@k on the
held-out eval set (App. B.1). The stored report keeps every sample (question, cell, sample
index, gold, completion, extracted answer, verdict, token count, finish reason, mean entropy),
loadable with polars and ``datasets``, so every table is recomputed from it and any other
analysis needs no new sampling. Its metadata leads with pass@1 and pass@k, and on an adapter's
report the Δ to the base model's report (an input), each with its 95% interval, then a per-cell
table; sampling settings and cache details follow.

Eval replicates accumulate: a report evaluates ``evaluation.replicates`` replicates, never
fewer than its latest materialisation holds, and one more when the nightly schedule runs it
(run tag ``saturated_dag/nightly``), so each night's seed tightens the tables' intervals.

Sampled in resumable shards keyed by everything it reads, code version included
(``assets/_stages.py``): an unchanged re-run is a cache hit that loads no model.

A report says what it evaluated: each row names the adapter (null on the base model's
report), its method, scorer, split and base model (``evaluation.ReportIdentity``); a cell's
metadata names the configuration evaluated with its hyperparameters and links its adapters,
the selection and the base model's report; each adapter's model card gets its pass@1 and pass@k
on the eval set (``saturated_dag.reporting.model_card``, rewritten only when it changed).
"""

import json
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import polars as pl

from assets._adapter_files import adapter_dir, adapter_key, adapter_weights_version
from assets._keys import located
from assets._metadata import frame_output, markdown_table, text_table
from assets._priority import AFTER_TRAINING, POLICY_ENGINE, priority
from assets._stages import cache_metadata, open_store, policy_identity, write_errors_reported
from assets.selection import same_adapters, selection_key
from resources import ExperimentResource, InferenceResource
from resources.parquet_io import latest_metadata, schema_metadata
from saturated_dag.config import Profile
from saturated_dag.evaluation.reports import (
    ReportIdentity,
    ReportShards,
    adapter_backends,
    evaluate_samples,
    per_question_results,
    sample_shards_together,
)
from saturated_dag.experiments import Adapter, Cell, Configuration
from saturated_dag.generation.base import GenerationBackend, SamplingParams
from saturated_dag.infra.shards import ShardStore, questions_digest
from saturated_dag.reporting.model_card import (
    CARD_FILE,
    CardOfAnotherAdapter,
    EvalFacts,
    StaleCard,
    eval_facts,
    write_eval_card,
)
from saturated_dag.reporting.result_tables import (
    display_rows,
    eval_set_caption,
    results_table,
    sample_text,
    with_interval,
)
from saturated_dag.training.config import settings_summary
from saturated_dag.training.selection import chosen

EVAL_ASSET = {"io_manager_key": "parquet_io", "pool": "gpu",
              "kinds": {"eval", "polars", "parquet"},  # "eval": the graph node's badge
              # a report: its columns go last, not as the 17-row "Columns" section above the
              # numbers (``schema_metadata``)
              "metadata": schema_metadata("eval_report", report=True)}


NIGHTLY_TAG = "saturated_dag/nightly"
"""The nightly schedule's run tag (``jobs/nightly.py``): each such run adds one eval replicate."""


def _recorded_replicates(context: dg.AssetExecutionContext) -> int:
    """How many eval replicates this report's latest materialisation holds (0: none yet)."""
    metadata = latest_metadata(context.instance, context.asset_key)
    if metadata is None:
        return 0
    value = metadata.get("eval_replicates")
    return int(value.value) if value is not None else 1  # before replicates: one evaluation


def _replicates(context: dg.AssetExecutionContext, configured: int) -> int:
    """The profile's ``evaluation.replicates``, never fewer than the report already holds
    (replicates accumulate: earlier ones are cache hits), and one more in a nightly run."""
    recorded = _recorded_replicates(context)
    nightly = context.run.tags.get(NIGHTLY_TAG) == "true"
    count = max(configured, recorded + 1 if nightly else recorded)
    if count != configured:
        context.log.info(f"{count} eval replicates ({recorded} recorded"
                         f"{', one added by the nightly run' if nightly else ''}; the profile "
                         f"asks for {configured})")
    return count


Target = tuple[Callable[[], GenerationBackend], Path | None, ReportIdentity]
"""What one training replicate's report samples: a backend loader, the adapter folder
(None: the base model) and what its rows say was evaluated."""


def _report(context: dg.AssetExecutionContext, experiment: ExperimentResource,
            inference: InferenceResource, task: str, targets: list[Target],
            label: str, base: pl.DataFrame | None = None,
            evaluated: dict[str, object] | None = None,
            data_seeds: list[int] | None = None
            ) -> tuple[pl.DataFrame, dict[str, object]]:
    """Evaluate each target (training replicate r = its index) over every eval replicate:
    the report and its metadata. ``base``: the base model's report, for the Δ (None: this is
    the base model's report); ``evaluated``: metadata saying what was evaluated, placed
    right below the science; ``data_seeds``: each target's data seed (column ``data_seed``,
    which the tables' bootstrap resamples first; 0 for every target when None).

    With ``evaluation.adapters_per_pass`` above 1 every missing shard of every (training,
    eval) replicate is first sampled in shared batched passes on the policy backend
    (``sample_shards_together``); the loop below then reads them as stored shards."""
    profile, sets = experiment.settings, experiment.plan[task].questions
    questions = sets.eval
    context.log.info(f"evaluating {label} ({len(targets)} training replicate(s)) on "
                     f"{len(questions)} {task} questions")
    replicates = _replicates(context, profile.evaluation.replicates)
    policy = policy_identity(inference.policy_settings())
    inputs = {"questions": questions_digest(questions)}
    plan: list[tuple[int, Target, int, SamplingParams, ShardStore | None, str]] = []
    for seed, target in enumerate(targets):
        fixed: dict[str, object] = {"policy": policy, "answer_check": profile.answer_check}
        if target[1] is not None:
            fixed["adapter"] = adapter_weights_version(target[1])  # weights, not timings
        for replicate in range(replicates):
            # eval replicate r: the eval set sampled again with seed + r, in its cached shards
            sampling = profile.sampling.model_copy(
                update={"seed": profile.sampling.seed + replicate})
            store, key = open_store(context, experiment,
                                    {**fixed, "sampling": sampling.model_dump()}, inputs)
            plan.append((seed, target, replicate, sampling.params(), store, key))
    batched = _sample_together(context, experiment, inference, questions, plan)
    parts = []
    cache: dict[str, object] = {}
    for seed, (backend, adapter, identity) in enumerate(targets):
        loaded: list[GenerationBackend] = []

        def backend_once(backend=backend, loaded=loaded) -> GenerationBackend:
            if not loaded:  # one engine for every eval replicate, loaded only on a miss
                loaded.append(backend())
            return loaded[0]

        for _, _, replicate, params, store, key in (p for p in plan if p[0] == seed):
            with write_errors_reported():
                parts.append(evaluate_samples(
                    questions, backend_once, params, profile.verify_workers,
                    log=context.log.info, store=store,
                    shard_size=profile.stages.shard_questions,
                    answer_check=profile.answer_check, replicate=replicate,
                    training_replicate=seed, identity=identity,
                    data_seed=data_seeds[seed] if data_seeds else 0))
            if store is not None and store.last_stats is not None:
                store.last_stats.computed_elsewhere(batched.get(str(store.root), 0))
            cache = cache_metadata(context, key, store)
        if adapter is not None and loaded:
            loaded[0].close()  # a merged copy on transformers; a no-op view on vLLM
    samples = pl.concat(parts)
    table = per_question_results(samples)
    base_table = None if base is None else per_question_results(base)
    science = science_metadata(table, base_table, profile.sampling.n,
                               sets.eval_set_name(table["question_id"].n_unique()))
    return samples, {
        **science,
        **(evaluated or {}),
        "temperature": profile.sampling.temperature,
        "top_p": profile.sampling.top_p,
        "max new tokens": profile.sampling.max_new_tokens,
        "samples per question": profile.sampling.n,
        "sampling seed": profile.sampling.seed,
        "answer_check": profile.answer_check,
        "samples": samples.height,
        "eval_replicates": replicates,
        "training replicates": len(targets),
        **({"data_seeds": len(set(data_seeds))} if data_seeds else {}),
        "mean_tokens": round(float(samples["num_tokens"].mean() or 0.0), 2),
        # where the samples came from: below the science
        **cache,  # the last replicate's; each replicate's is in the log
        "shards sampled in batched passes": sum(batched.values()),
        "preview": markdown_table(table, max_rows=10),
        "samples preview": markdown_table(
            samples.select("question_id", "sample_index", "answer", "gold", "correct",
                           "num_tokens"), max_rows=10),
    }


def _summary_row(table: pl.DataFrame, base: pl.DataFrame | None, k: int,
                 eval_set: str | None = None) -> pl.DataFrame:
    """The report as a results table's rows: the base model's, then this report's (when it is
    an adapter's: ``base`` given), with intervals and the paired Δ."""
    if base is None:
        return results_table(table, {}, k=k, eval_set=eval_set)
    return results_table(base, {("adapter", "adapter", None): table}, k=k, eval_set=eval_set)


def science_metadata(table: pl.DataFrame, base: pl.DataFrame | None, k: int,
                     eval_set: str) -> dict[str, object]:
    """What a researcher reads first: pass@1 and pass@k with their 95% intervals, the Δ to
    the base model with its paired interval (an adapter's report), as plain numbers the
    Plots view charts across materialisations, then the same per eval cell as a table."""
    frame = _summary_row(table, base, k, eval_set)
    row = frame.row(frame.height - 1, named=True)
    metrics = [c for c in frame.columns if c.startswith("pass@") and " " not in c]
    shown = [*metrics, *(f"Δ {m}" for m in metrics)] if base is not None else metrics
    numbers: dict[str, object] = {}
    for col in shown:
        for end in ("", " low", " high"):
            numbers[f"{col}{end}"] = round(float(row[f"{col}{end}"]), 2)
    if base is not None:
        numbers["base pass@1"] = round(float(frame["pass@1"][0]), 2)
    numbers["questions"] = int(row["questions"])
    out: dict[str, object] = {
        "summary": dg.MetadataValue.md(estimates_summary(frame, shown))}
    out["about the intervals"] = dg.MetadataValue.md(eval_set_caption(frame))
    headers: list[str] = []
    rows: list[list[object]] = []
    for cell in sorted(table["cell"].unique().to_list()):
        base_cell = None if base is None else base.filter(pl.col("cell") == cell)
        part = _summary_row(table.filter(pl.col("cell") == cell), base_cell, k)
        names, texts = display_rows(part, best=str)
        # pass@1 and its Δ (pass@k too on the base model's): the UI gives the table little width
        wanted = ["pass@1", "Δ pass@1"] if base is not None else [
            n for n in names if n.startswith("pass@")]
        picked = {n: v for n, v in zip(names, texts[-1], strict=True) if n in wanted}
        if base is not None:
            picked = {"base pass@1": f"{part['pass@1'][0]:.2f}", **picked}
        headers = ["cell", *picked]
        rows.append([cell, *picked.values()])
    out["by cell"] = text_table(headers, rows)  # each cell's question count: the eval set's
    # the plain numbers last: **Plots** charts them across materialisations (each nightly
    # replicate a point), but three rows per estimate must not push the answer down the page
    return {**out, **numbers}


def estimates_summary(frame: pl.DataFrame, shown: list[str]) -> str:
    """The report's answer for the top of its page: one Markdown line per estimate, its value
    and 95% interval together (``pass@1 37.37% [29.95, 45.31]``; a Δ signed, in points,
    against the base model's pass@1), then the sample the intervals rest on.

    Why one line each: as three plain entries (value, low, high) an estimate took three rows,
    and the eval report's numbers started below the first screen."""
    row = frame.row(frame.height - 1, named=True)
    lines = []
    for column in shown:
        delta = column.startswith("Δ")
        spec = "+.2f" if delta else ".2f"
        text = with_interval(f"{row[column]:{spec}}", row.get(f"{column} low"),
                             row.get(f"{column} high"), delta)
        unit = " points" if delta else "%"
        value, _, interval = text.partition(" ")
        line = f"{column} **{value}{unit}** {interval}".rstrip()
        if column == "Δ pass@1":
            line += f" against the base model's {frame['pass@1'][0]:.2f}%"
        lines.append(f"- {line}")
    head = ("**The base model on the eval set**, each estimate with its 95% interval:"
            if frame.height == 1 else "**This configuration on the eval set**, each estimate "
            "with its 95% interval (for Δ, paired with the base model):")
    return f"{head}\n\n" + "\n".join(lines) + f"\n\n{sample_text(frame)}."


def _sample_together(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                     inference: InferenceResource, questions: list,
                     plan: list[tuple[int, Target, int, SamplingParams, ShardStore | None, str]]
                     ) -> dict[str, int]:
    """The batched pass over every part of the report (``sample_shards_together``): shards
    sampled per store folder; none when ``adapters_per_pass`` is 1 or stages are not cached
    (the shards would have nowhere to wait)."""
    profile = experiment.settings
    per_pass = profile.evaluation.adapters_per_pass
    if per_pass == 1 or any(store is None for *_, store, _ in plan):
        return {}
    loaded: list[GenerationBackend] = []

    def policy() -> GenerationBackend:
        if not loaded:
            loaded.append(inference.policy_backend(context.log))
            if not hasattr(loaded[0], "sample_many"):
                raise dg.Failure(f"the {loaded[0].name} backend cannot sample several "
                                 "adapters in one pass: set evaluation.adapters_per_pass: 1")
        return loaded[0]

    to_sample = [ReportShards(store, params, target[1]) for _, target, _, params, store, _ in plan
            if store is not None]
    with write_errors_reported():
        sampled = sample_shards_together(
            questions, to_sample, policy, profile.stages.shard_questions, profile.verify_workers,
            log=context.log.info, answer_check=profile.answer_check, per_pass=per_pass)
    if any(sampled.values()):
        context.log.info(f"batched passes sampled {sum(sampled.values())} shard(s) of "
                         f"{len(to_sample)} report part(s), up to {per_pass} side by side")
    return sampled


def base_eval_asset(task: str) -> dg.AssetsDefinition:
    @dg.asset(key=[task, "eval", "base"], group_name=task, deps=["base_model"], **EVAL_ASSET,
              op_tags=priority(POLICY_ENGINE),
              description=f"Eval report: the base model on the {task} eval set.")
    def base_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                  inference: InferenceResource) -> dg.Output[pl.DataFrame]:
        model = inference.policy_settings().model
        samples, metadata = _report(
            context, experiment, inference, task,
            [(lambda: inference.policy_backend(context.log), None,
              ReportIdentity(base_model=model))],
            "base model", evaluated={"evaluated": "the base model", "base_model": model})
        return frame_output(samples, metadata)

    return base_eval


def adapter_eval_asset(task: str, cell: Cell,
                       trained: dict[Configuration, list[Adapter]]) -> dg.AssetsDefinition:
    """The cell's report: its one configuration, or (several: ``trained`` has more than one
    entry) the one its selection asset chose, over that configuration's training seeds."""
    selected = len(trained) > 1
    # the base model's report: the Δ and its paired interval are on this report's page
    ins = {"base": dg.AssetIn(key=[task, "eval", "base"])}
    if selected:
        upstream = {"ins": {**ins, "selection": dg.AssetIn(key=selection_key(task, cell))}}
    else:
        upstream = {"ins": ins, "deps": [adapter_key(task, cell)]}
    by_name = {config.name: seeds for config, seeds in trained.items()}

    @dg.asset(key=[task, cell.split, "eval", cell.name], group_name=f"{task}_{cell.split}",
              **upstream, **EVAL_ASSET, op_tags=priority(AFTER_TRAINING),
              description=f"Eval report: the {cell.name} cell ({cell.split}) on the {task} eval set"
              + (": the configuration its selection chose." if selected else "."))
    def adapter_eval(context: dg.AssetExecutionContext, experiment: ExperimentResource,
                     inference: InferenceResource, base: pl.DataFrame,
                     **chosen_by: pl.DataFrame) -> dg.Output[pl.DataFrame]:
        run = experiment.plan[task]
        same_adapters(run, cell, trained)
        settings = inference.policy_settings()
        profile = experiment.settings  # its key prefix: what this graph's keys start with
        name = chosen(chosen_by["selection"]) if selected else next(iter(by_name))
        if name not in by_name:
            raise dg.Failure(f"selection of {cell.name} chose {name!r}, which is not one of "
                             f"its configurations {sorted(by_name)}: re-materialise "
                             f"{located(profile, selection_key(task, cell)).to_user_string()}")
        targets: list[Target] = []
        for seeded in by_name[name]:
            folder = adapter_dir(experiment.output_dir, task, seeded)
            identity = ReportIdentity(base_model=settings.model, adapter=seeded.name,
                                      method=seeded.method, scorer=seeded.scorer,
                                      split=seeded.split)
            if not (folder / "adapter_config.json").is_file():
                raise dg.Failure(f"adapter {folder} is missing: materialise "
                                 f"{located(profile, adapter_key(task, cell)).to_user_string()}"
                                 " first")

            def backend(folder=folder, seeded=seeded) -> GenerationBackend:
                # vLLM: a LoRA request on the already-loaded engine; transformers: merged
                base = inference.policy_backend(context.log)
                return adapter_backends(base, {seeded.name: folder}, base_model=settings.model,
                                        dtype=settings.dtype,
                                        device=settings.device)[seeded.name]

            targets.append((backend, folder, identity))
        seeds = by_name[name]
        partitions = [run.partition_keys[cell][s] for s in seeds]
        config = run.configuration_keys[cell][name]
        evaluated = configuration_metadata(task, cell, config, seeds, partitions,
                                           experiment.output_dir, selected, settings.model,
                                           profile)
        samples, metadata = _report(context, experiment, inference, task, targets,
                                    f"{cell.split}/{cell.name} ({config})", base=base,
                                    evaluated=evaluated,
                                    data_seeds=[seeded.data_seed for seeded in seeds])
        eval_set = run.questions.eval_set_name(samples["question_id"].n_unique())
        metadata.update(update_model_cards(
            context, samples, base, seeds, [t[1] for t in targets], task,
            key=context.asset_key, k=experiment.settings.sampling.n,
            eval_set=eval_set, partitions=(located(profile, adapter_key(task, cell)),
                                           partitions)))
        return frame_output(samples, metadata)

    return adapter_eval


def _link(name: str, index: int, count: int) -> str:
    """A metadata label, numbered by training replicate when the report has several."""
    return name if count == 1 else f"{name} (training replicate {index})"


def configuration_metadata(task: str, cell: Cell, name: str, seeds: list[Adapter],
                           partitions: list[str], output_dir: str, selected: bool,
                           base_model: str, profile: Profile) -> dict[str, object]:
    """What a cell's report evaluated: the configuration (the selection's choice when the
    cell has several) by its key (``name``: ``experiments.configuration_key``), its adapters by
    their partition keys (``partitions``, in ``seeds``' order), its hyperparameters as training
    recorded them, and links to its adapters' asset, the selection and the base model's report.
    The adapters' folders and model cards are on the adapter's page (each partition's, for
    several): a folder's path is one word wider than the UI's metadata panel. The links name the
    keys of ``profile``'s graph (its ``key_prefix``)."""
    out: dict[str, object] = {
        "configuration": name,
        "chosen by": ("the selection (validation pass@1, App. B)" if selected
                      else "the cell's only configuration"),
        "base_model": base_model,
    }
    record = adapter_dir(output_dir, task, seeds[0]) / "training_config.json"
    if record.is_file():
        settings = json.loads(record.read_text()).get("settings")
        if settings:
            out["hyperparameters"] = dg.MetadataValue.json(
                settings_summary(seeds[0].method, settings))
    if selected:
        out["selection"] = dg.MetadataValue.asset(located(profile, selection_key(task, cell)))
    out["base eval report"] = dg.MetadataValue.asset(located(profile, [task, "eval", "base"]))
    out["adapters (asset)"] = dg.MetadataValue.asset(located(profile, adapter_key(task, cell)))
    for index, partition in enumerate(partitions):
        out[_link("adapter", index, len(seeds))] = partition
    return out


def eval_observation(adapter: dg.AssetKey, partition: str, facts: EvalFacts,
                     report: dg.AssetKey) -> dg.AssetObservation:
    """The adapter partition's eval result, once its cell's report has it: an observation
    of that partition, so the adapter's page shows its pass@1 and pass@k with their 95%
    intervals beside its training record: one entry per metric, its Δ to the base model in
    the same line (an observation's entry is a tall row in the UI, its "Observed in run" column
    wrapped, so fewer rows keep the adapter's settings on its page's first two screens)."""
    lines = {}
    for name, (v, lo, hi) in facts.metrics.items():
        if not name.startswith("Δ"):
            dv, dlo, dhi = facts.metrics.get(f"Δ {name}", (None, None, None))
            lines[f"eval {name}"] = f"{v:.2f}% [{lo:.2f}, {hi:.2f}]" + (
                "" if dv is None else f"; Δ {dv:+.2f} [{dlo:+.2f}, {dhi:+.2f}] points")
    return dg.AssetObservation(asset_key=adapter, partition=partition, metadata={
        **lines, "eval set": f"{facts.eval_set}: {facts.questions} questions x "
        f"{facts.samples_per_question} samples x {facts.eval_replicates} eval replicate(s)",
        "eval report": dg.MetadataValue.asset(report)})


def update_model_cards(context: dg.AssetExecutionContext, samples: pl.DataFrame,
                       base: pl.DataFrame, seeds: list[Adapter], folders: list[Path | None],
                       task: str, key: dg.AssetKey, k: int, eval_set: str,
                       partitions: tuple[dg.AssetKey, list[str]] | None = None
                       ) -> dict[str, object]:
    """Fill each evaluated adapter's model card with its eval part, and say so in the
    metadata (the card's path is on the adapter's page). A card that cannot be written (not
    the adapter's own yet, or about other weights) is a warning, not a failure: the report
    is the product. A card that names another adapter fails the step: its folder was
    copied, and the report may be too.
    ``partitions``: the cell's adapter asset and each seed's partition key there, which get
    the adapter's eval result as an observation (``eval_observation``)."""
    out: dict[str, object] = {}
    for index, folder in enumerate(folders):
        if folder is None:
            continue
        label = _link("model card", index, len(folders))
        facts = eval_facts(samples, base, index, k, eval_set, key.to_user_string(),
                           adapter_weights_version(folder))
        if partitions is not None:
            context.log_event(eval_observation(partitions[0], partitions[1][index], facts,
                                               key))
        try:
            # the folder was checked to be this adapter (adapter_dir); its card must be too
            if write_eval_card(folder, facts, (task, seeds[index].split, seeds[index].name)):
                context.log.info(f"model card {folder / CARD_FILE}: eval results written")
            named = partitions[1][index] if partitions is not None else seeds[index].name
            out[label] = f"eval results written to {CARD_FILE} ({named})"
        except CardOfAnotherAdapter as err:  # not a stale card: another adapter's
            raise dg.Failure(str(err)) from None
        except (StaleCard, OSError) as err:
            context.log.warning(f"model card of {seeds[index].name} not updated: {err}")
            out[label] = f"not updated: {err}"
    return out


def coverage_check(task: str, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """Advisory (WARN): a report missing questions is still readable, and the results table
    states its eval set; it does not block the tables downstream."""

    @dg.asset_check(asset=asset, name="eval_report_covers_every_question", blocking=False,
                    description="The report has exactly the eval set's question ids, each "
                    "with n distinct samples in every eval replicate of every training "
                    "replicate, replicates 0.. without a gap and at least the profile's "
                    "(advisory: WARN).")
    def check(experiment: ExperimentResource, report: pl.DataFrame) -> dg.AssetCheckResult:
        profile = experiment.settings
        expected = {q.question_id for q in experiment.plan[task].questions.eval}
        got = set(report["question_id"].cast(pl.String).to_list())
        n, replicates = profile.sampling.n, profile.evaluation.replicates
        keys = ["question_id", "training_replicate", "replicate", "sample_index"]
        duplicated = report.height - report.select(keys).n_unique()
        per_question = report.group_by("question_id", "training_replicate", "replicate").len()
        wrong_n = int((per_question["len"] != n).sum())
        found_replicates = report["replicate"].n_unique()  # nightly runs add replicates
        seeds = report["training_replicate"].n_unique()
        return dg.AssetCheckResult(
            passed=(got == expected and wrong_n == 0 and duplicated == 0
                    and found_replicates >= replicates
                    and sorted(report["replicate"].unique()) == list(range(found_replicates))
                    and sorted(report["training_replicate"].unique()) == list(range(seeds))
                    and per_question.height == len(got) * found_replicates * seeds),
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"expected_questions": len(expected), "reported_questions": len(got),
                      "missing": len(expected - got), "unexpected": len(got - expected),
                      "duplicated": duplicated, "questions_without_n_samples": wrong_n,
                      "expected_n": n, "replicates": found_replicates,
                      "training_replicates": seeds,
                      "profile_replicates": replicates})

    return check
