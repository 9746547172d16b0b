"""The columns and dtypes of every asset frame, declared once.

Why: each asset's frame is read by other assets, by the trainers and by
``datasets.load_dataset``; a column that silently changes name, order or dtype (an all-null
column that polars infers as ``Null``, an int that became a float) would only show up steps
later. The storage layer checks every written frame against its declaration (``check_frame``)
and the same declaration builds frames (``pl.DataFrame(rows, schema=schema("dpo_pairs"))``,
which also gives an empty frame its columns).

Nullable columns are not marked: polars columns are all nullable (``terms``/``digits`` are
null for GSM8K, ``answer`` when no answer was read, ``rho`` when too few points).

Column names may hold a parameter, ``{k}``: the result and sweep tables have a ``pass@{k}``
column for the profile's ``sampling.n``. ``schema(name, k=8)`` resolves it; ``check_frame``
reads ``k`` from the frame's own columns when not given (every templated column must agree),
so the storage layer checks these tables without knowing the profile; a table without such a
column is read as k=1. Each sweep has its own schema, ``sweep_table:<sweep>``
(``sweep_schema_name``), since its setting columns depend on the sweep.

Pure core: no Dagster import (``resources.parquet_io`` turns these into Dagster metadata).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

__all__ = ["SCHEMAS", "SWEEP_SETTINGS", "FrameSchema", "check_frame", "get_schema", "schema",
           "sweep_schema_name"]

Columns = tuple[tuple[str, pl.DataType], ...]


def _cols(*pairs: tuple[str, type[pl.DataType] | pl.DataType]) -> Columns:
    """Dtype classes (``pl.Int64``) as instances, so schemas compare and print alike."""
    return tuple((name, dtype() if isinstance(dtype, type) else dtype) for name, dtype in pairs)


@dataclass(frozen=True)
class FrameSchema:
    """One asset frame kind: its columns in order, each with its polars dtype."""

    name: str
    columns: Columns
    description: str
    defaults: Mapping[str, int | str] = field(default_factory=dict, hash=False)
    """Parameter values ``check_frame`` assumes when no column gives one (``k=1``)."""

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters the column names hold (``("k",)`` for ``pass@{k}``), sorted."""
        return tuple(sorted({name for col, _ in self.columns for name in _fields(col)}))

    def resolve(self, **params: int | str) -> pl.Schema:
        """The concrete schema, with every ``{param}`` in a column name filled in.

        A filled-in name equal to an earlier column is that column (``pass@{k}`` with k=1 is
        ``pass@1``: the tables then have one pass@1 column, not two).
        """
        missing = [p for p in self.params if p not in params]
        if missing:
            raise ValueError(f"the {self.name} schema needs {', '.join(missing)} "
                             f"(its columns include {self._templated()})")
        resolved: dict[str, pl.DataType] = {}
        for col, dtype in self.columns:
            resolved.setdefault(col.format(**params) if _fields(col) else col, dtype)
        return pl.Schema(resolved)

    def _templated(self) -> str:
        return ", ".join(repr(c) for c, _ in self.columns if _fields(c))


def _fields(column: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(column) if name]


_KEY = (("question_id", pl.String), ("sample_index", pl.Int64))
_QUESTION = (("question_id", pl.String), ("task", pl.String), ("pool", pl.String),
             ("cell", pl.String), ("terms", pl.Int64), ("digits", pl.Int64))
_SCORES = (*_KEY, ("split", pl.String), ("correct", pl.Boolean), ("scorer", pl.String),
           ("score", pl.Float64))
_JUDGE = (*_SCORES, ("wins", pl.Float64), ("comparisons", pl.Int64),
          ("parse_failures", pl.Int64), ("forced_judgments", pl.Int64))
_PAIRS = (("question_id", pl.String), ("prompt", pl.String), ("chosen", pl.String),
          ("chosen_sample", pl.Int64), ("chosen_score", pl.Float64), ("rejected", pl.String),
          ("rejected_sample", pl.Int64), ("rejected_score", pl.Float64))
_SFT = (*_KEY, ("prompt", pl.String), ("completion", pl.String))
_METRICS = (("pass@1", pl.Float64), ("pass@{k}", pl.Float64), ("Δ pass@1", pl.Float64),
            ("Δ pass@{k}", pl.Float64),
            # 95% intervals (docs/statistics.md) and the sample they were computed on
            *((f"{m} {end}", pl.Float64) for m in ("pass@1", "pass@{k}", "Δ pass@1",
                                                    "Δ pass@{k}") for end in ("low", "high")),
            ("Δ pass@1 excludes 0", pl.Boolean), ("Δ pass@{k} excludes 0", pl.Boolean),
            # bootstrap p of Δ = 0 and Holm's adjustment over the table's rows
            *((f"Δ {m} {kind}", pl.Float64) for m in ("pass@1", "pass@{k}")
              for kind in ("p", "Holm p")),
            # the sample: questions, eval replicates, training seeds per data seed, data seeds
            ("questions", pl.Int64), ("replicates", pl.Int64), ("training replicates", pl.Int64),
            ("data seeds", pl.Int64), ("eval_set", pl.String))

BEHAVIOUR_MEASURES = ("pass@1", "mean_tokens", "mean_entropy", "answer_rate", "truncated_rate")

SWEEP_SETTINGS: Mapping[str, tuple[tuple[str, type[pl.DataType]], ...]] = {
    "rank_weight": (("lambda", pl.Float64),),
    "rrhf_variants": (("variant", pl.String),),
    "dpo_beta": (("beta", pl.Float64), ("lr", pl.Float64)),
}
"""Each sweep's setting columns, in the order of ``experiments.sweeps``' ``SweepRow.settings``."""


def sweep_schema_name(sweep: str) -> str:
    """The schema name of one sweep's table (``sweep_table:rank_weight``)."""
    if sweep not in SWEEP_SETTINGS:
        raise ValueError(f"unknown sweep {sweep!r}: the sweep tables are "
                         f"{', '.join(sorted(SWEEP_SETTINGS))}")
    return f"sweep_table:{sweep}"


def _declare(*schemas: FrameSchema) -> dict[str, FrameSchema]:
    return {s.name: s for s in schemas}


SCHEMAS: Mapping[str, FrameSchema] = _declare(
    FrameSchema("generation_pool", _cols(
        *_QUESTION, ("problem", pl.String), ("prompt", pl.String), ("gold", pl.String),
        ("sample_index", pl.Int64), ("completion", pl.String), ("answer", pl.String),
        ("correct", pl.Boolean), ("num_tokens", pl.Int64), ("finish_reason", pl.String),
        ("mean_entropy", pl.Float64)),
        "one row per sampled completion, verified"),
    FrameSchema("difficulty_partitions", _cols(
        *_QUESTION, ("n_samples", pl.Int64), ("n_correct", pl.Int64), ("p_hat", pl.Float64),
        ("split", pl.String)),
        "one row per question: its empirical pass rate and split"),
    FrameSchema("random_scores", _cols(*_SCORES),
                "one row per selected completion: a uniform random score"),
    *(FrameSchema(f"{name}_scores", _cols(*_SCORES),
                  "one row per selected completion: a known-answer score (docs/testbed.md)")
      for name in ("oracle", "oracle_rho75", "oracle_rho50", "oracle_rho25", "oracle_rho0",
                   "oracle_shuffled")),
    FrameSchema("entropy_scores", _cols(*_SCORES, ("mean_entropy", pl.Float64)),
                "one row per selected completion: inverse mean token entropy"),
    FrameSchema("self_judge_scores", _cols(*_JUDGE),
                "one row per selected completion: the policy's round-robin win rate"),
    FrameSchema("strong_judge_scores", _cols(*_JUDGE),
                "one row per selected completion: the strong judge's round-robin win rate"),
    FrameSchema("scorer_agreement", _cols(
        ("question_id", pl.String), ("split", pl.String), ("scorer_a", pl.String),
        ("scorer_b", pl.String), ("n", pl.Int64), ("rho", pl.Float64), ("status", pl.String)),
        "one row per question and scorer pair: Spearman's rho"),
    FrameSchema("dpo_pairs", _cols(*_PAIRS), "one (chosen, rejected) pair per question"),
    FrameSchema("correctness_pairs", _cols(*_PAIRS),
                "hard split: a correct chosen against an incorrect rejected, per question"),
    FrameSchema("rrhf_groups", _cols(*_SFT, ("score", pl.Float64)),
                "every scored completion of a question, one row each"),
    FrameSchema("raft_set", _cols(*_SFT), "the scorer's argmax completion per question"),
    FrameSchema("sft_set", _cols(*_SFT), "every correct completion of the split's questions"),
    FrameSchema("eval_report", _cols(
        # what was evaluated (evaluation.ReportIdentity), so a file read alone says it
        ("adapter", pl.String), ("method", pl.String), ("scorer", pl.String),
        ("split", pl.String), ("base_model", pl.String),
        ("question_id", pl.String), ("cell", pl.String), ("data_seed", pl.Int64),
        ("training_replicate", pl.Int64),
        ("replicate", pl.Int64), ("sample_index", pl.Int64), ("gold", pl.String),
        ("completion", pl.String), ("answer", pl.String),
        ("correct", pl.Boolean), ("num_tokens", pl.Int64), ("finish_reason", pl.String),
        ("mean_entropy", pl.Float64)),
        "one row per sampled completion of an eval question, data seed (the draw of training "
        "data the adapter was trained on; 0 for the base model; a report without the column "
        "is data seed 0), training-seed replicate (the adapter's index among its row's "
        "adapters, data seed major: data seed d, training seed t is d * T + t; 0 for the "
        "base model) and eval replicate, verified: every table is recomputed from these "
        "(evaluation.per_question_results) without sampling again. adapter (the adapter's "
        "name), method, scorer and split are null on the base model's report; base_model is "
        "the policy as the profile names it"),
    FrameSchema("behaviour", _cols(
        ("row", pl.String), ("cell", pl.String), ("samples", pl.Int64),
        *((m, pl.Float64) for m in BEHAVIOUR_MEASURES),
        *((f"Δ {m}", pl.Float64) for m in BEHAVIOUR_MEASURES),
        ("Δ pass@1 low", pl.Float64), ("Δ pass@1 high", pl.Float64)),
        "per row (base model, adapters) and eval cell: pass@1, length, entropy, answer and "
        "truncation rates, each with its change from the base model; Δ pass@1's 95% interval"),
    FrameSchema("selection", _cols(
        ("configuration", pl.String), ("adapter", pl.String), ("learning_rate", pl.Float64),
        ("epochs", pl.Int64),
        ("batch_size", pl.Int64), ("dpo_loss_type", pl.String), ("dpo_beta", pl.Float64),
        ("dpo_nll_weight", pl.Float64), ("rrhf_rank_weight", pl.Float64), ("seeds", pl.Int64),
        ("best epochs", pl.String),
        ("validation pass@1", pl.Float64),
        ("behind the best", pl.Float64), ("one standard error", pl.Float64),
        ("chosen", pl.Boolean)),
        "a cell's selection (App. B): each configuration (by its adapters' partition key "
        "without the seed; adapter: its seed-0 adapter's name) with its settings and mean "
        "validation "
        "pass@1 over its training seeds (%), the one training.selection.rule chose (with the "
        "one-SE rule: points behind the best and the gap's paired standard error)"),
    FrameSchema("expected_best_by_budget", _cols(
        ("split", pl.String), ("method", pl.String), ("scorer", pl.String), ("cell", pl.String),
        ("configurations tried", pl.Int64), ("configurations in all", pl.Int64),
        ("expected best validation pass@1", pl.Float64), ("low", pl.Float64),
        ("high", pl.Float64)),
        "each selected cell's expected best validation pass@1 (%) when k of its "
        "configurations are tried, with the 95% interval over its configurations "
        "(Dodge et al. 2019; saturated_dag/analysis/budget.py)"),
    FrameSchema("styles", _cols(
        ("row", pl.String), ("cell", pl.String), ("style", pl.String), ("samples", pl.Int64),
        ("share", pl.Float64), ("accuracy", pl.Float64), ("Δ share", pl.Float64)),
        "per row, eval cell and solution style (embedded model): share, accuracy, Δ share"),
    FrameSchema("testbed_validation", _cols(
        ("method", pl.String), ("scorer", pl.String), ("role", pl.String), ("recipe", pl.String),
        ("target ρ", pl.Float64), ("ρ with oracle", pl.Float64), ("replicates", pl.Int64),
        ("data seeds", pl.Int64), ("questions", pl.Int64), ("pass@1", pl.Float64),
        ("Δ pass@1", pl.Float64),
        ("Δ low", pl.Float64), ("Δ high", pl.Float64), ("p", pl.Float64),
        ("detectable effect", pl.Float64)),
        "one row per testbed row (method x scorer): pass@1 and its paired Δ to the base model "
        "with the 95% interval over data seeds x training seeds x questions (replicates: "
        "training seeds per data seed; docs/testbed.md)"),
    FrameSchema("dpo_recipe_search", _cols(
        ("signal", pl.String), ("DPO loss", pl.String), ("NLL weight", pl.Float64),
        ("β", pl.Float64), ("η", pl.Float64), ("epochs kept", pl.String),
        ("signal Δ", pl.Float64), ("signal low", pl.Float64), ("signal high", pl.Float64),
        ("shuffled Δ", pl.Float64), ("shuffled low", pl.Float64), ("shuffled high", pl.Float64),
        ("contrast Δ", pl.Float64), ("contrast low", pl.Float64), ("contrast high", pl.Float64),
        ("passes", pl.Boolean), ("reward margin (last)", pl.Float64),
        ("chosen log-ratio (last)", pl.Float64), ("rejected log-ratio (last)", pl.Float64),
        ("chosen log-prob moved", pl.Float64), ("rejected log-prob moved", pl.Float64),
        ("style shift (TV, points)", pl.Float64), ("steps share", pl.Float64),
        ("chosen by the rule", pl.Boolean)),
        "one row per signal (planted: the oracle's pairs against its shuffle; correctness: the "
        "hard split's random correct-vs-incorrect pairs against the same pairs half swapped) "
        "and DPO recipe (loss x β x NLL weight x η), in configuration order: Δ validation "
        "pass@1 (points) of the signal's and the shuffled runs to the base model and of the "
        "signal against its shuffle (contrast), with 95% intervals, whether the signal's "
        "control passes there, the signal's runs' training log (means over data seeds: the "
        "last chosen and rejected log-ratios to the reference model), the style shift and the "
        "rule's choice (docs/testbed.md)"),
    FrameSchema("validation_samples", _cols(
        ("question_id", pl.String), ("sample_index", pl.Int64), ("completion", pl.String),
        ("correct", pl.Boolean)),
        "one row per sampled completion of a model on the validation questions, sampled and "
        "checked as every training's validation is"),
    FrameSchema("results_table", _cols(
        ("split", pl.String), ("method", pl.String), ("scorer", pl.String), *_METRICS),
        "the base model, then one row per adapter; k is the profile's sampling.n", {"k": 1}),
    *(FrameSchema(sweep_schema_name(sweep), _cols(
        ("split", pl.String), ("run", pl.String), *settings, ("epochs", pl.Int64),
        ("adapter", pl.String), *_METRICS),
        f"the base model, then one row per {sweep} setting; k is the profile's sampling.n",
        {"k": 1})
      for sweep, settings in SWEEP_SETTINGS.items()),
    FrameSchema("runs_table", _cols(
        ("task", pl.String), ("adapter", pl.String), ("configuration", pl.String),
        ("cells", pl.String), ("split", pl.String), ("method", pl.String),
        ("scorer", pl.String), ("seed", pl.Int64),
        # the trainer's settings as training_config.json records them (null: not the method's)
        ("learning_rate", pl.Float64), ("epochs", pl.Int64), ("batch_size", pl.Int64),
        ("per_device_batch_size", pl.Int64), ("warmup_ratio", pl.Float64),
        ("weight_decay", pl.Float64), ("max_length", pl.Int64), ("dpo_beta", pl.Float64),
        ("dpo_loss", pl.String), ("rrhf_rank_weight", pl.Float64),
        ("rrhf_use_sft", pl.Boolean), ("rrhf_hinge", pl.Boolean),
        ("rrhf_logistic_weight", pl.Boolean), ("rrhf_sft_token_mean", pl.Boolean),
        ("lora_r", pl.Int64), ("lora_alpha", pl.Int64), ("lora_dropout", pl.Float64),
        ("precision", pl.String),
        ("epoch kept", pl.Int64), ("validation pass@1", pl.Float64), ("chosen", pl.Boolean),
        # this adapter's share of its cell's eval report (null: no report evaluates it)
        ("eval report", pl.String),
        *((f"{m}{end}", pl.Float64) for m in ("pass@1", "pass@{k}", "Δ pass@1", "Δ pass@{k}")
          for end in ("", " low", " high")),
        ("questions", pl.Int64), ("replicates", pl.Int64), ("eval_set", pl.String),
        ("adapter_path", pl.String)),
        "one row per trained adapter (every configuration x training seed of every cell, "
        "sweeps included): its settings, kept epoch, validation pass@1, "
        "whether its cell chose it, and its eval pass@1 / pass@k with the Δ to the base model "
        "and paired 95% intervals; k is the profile's sampling.n", {"k": 1}),
)


def _registered_scorer_schema(name: str) -> FrameSchema | None:
    """A scorer registered beyond the built-ins (``docs/extending.md``) writes the common
    score columns (``scorers.scored_completions.SCORE_COLUMNS``); its schema is declared by its
    entry."""
    from saturated_dag.scorers.registry import SCORERS

    spec = next((s for s in SCORERS.values() if s.asset_name == name and s.compute), None)
    if spec is None:
        return None
    return FrameSchema(name, _cols(*_SCORES), f"one row per selected completion: "
                       f"{spec.name}'s score ({spec.description.rstrip('.')})")


def get_schema(name: str) -> FrameSchema:
    """The declared schema of a frame kind; an unknown name lists the known ones."""
    try:
        return SCHEMAS[name]
    except KeyError:
        scored = _registered_scorer_schema(name)
        if scored is not None:
            return scored
        raise ValueError(f"no frame schema is declared for {name!r}; declared: "
                         f"{', '.join(SCHEMAS)}") from None


def schema(name: str, **params: int | str) -> pl.Schema:
    """The concrete polars schema of a frame kind (``k=8`` for the tables' ``pass@{k}``)."""
    return get_schema(name).resolve(**params)


def _infer_params(declared: FrameSchema, columns: list[str]) -> dict[str, str]:
    """``{param: value}`` read from the frame's columns that match a templated name."""
    fixed = {c for c, _ in declared.columns if not _fields(c)}
    found: dict[str, set[str]] = {p: set() for p in declared.params}
    for template, _ in declared.columns:
        names = _fields(template)
        if not names:
            continue
        pattern = "".join(re.escape(literal) + (rf"(?P<{name}>[1-9][0-9]*)" if name else "")
                          for literal, name, _, _ in string.Formatter().parse(template))
        for col in columns:
            match = re.fullmatch(pattern, col)
            if match and col not in fixed:
                for name in names:
                    found[name].add(match[name])
    several = {p: sorted(v, key=int) for p, v in found.items() if len(v) > 1}
    if several:
        detail = "; ".join(f"{p} = {', '.join(v)}" for p, v in several.items())
        raise ValueError(f"{declared.name} frame has columns for more than one value of "
                         f"{detail}: its {declared._templated()} columns must agree")
    return {p: next(iter(v)) for p, v in found.items() if v}


def check_frame(frame: pl.DataFrame, schema_name: str, **params: int | str) -> None:
    """Raise ``ValueError`` unless ``frame`` has exactly the declared columns, dtypes, order.

    Extra columns are errors too: a stored frame is read by name by other assets and by
    ``datasets``, and an undeclared column is either a typo of a declared one or data that no
    declaration documents. The message names the frame kind and every difference (missing
    column, extra column, expected vs actual dtype), or the expected and actual order.
    """
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"{schema_name} must be a polars DataFrame, got {type(frame).__name__}")
    declared = get_schema(schema_name)
    given = {**declared.defaults, **_infer_params(declared, frame.columns), **params}
    unknown = {p: "{" + p + "}" for p in declared.params if p not in given}
    expected = declared.resolve(**unknown, **given)
    got = frame.schema
    problems = [f"missing column {c!r} ({t})" for c, t in expected.items() if c not in got]
    problems += [f"extra column {c!r} ({t})" for c, t in got.items() if c not in expected]
    problems += [f"column {c!r} has dtype {got[c]}, expected {t}"
                 for c, t in expected.items() if c in got and got[c] != t]
    if not problems and list(got) != list(expected):
        problems.append(f"columns in another order: expected {list(expected)}, "
                        f"got {list(got)}")
    if problems:
        raise ValueError(f"{schema_name} frame does not match its declared schema "
                         f"(saturated_dag.schemas): {'; '.join(problems)}")
