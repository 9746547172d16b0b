"""The experiment matrix: which cells a profile evaluates (split x method x scorer, plus the
paper's sweeps: λ ablation, σ-RRHF variants, DPO β x learning rate) and which adapters each
cell trains (the configurations x the training-seed replicates, App. B).

Pure data, so the Dagster layer builds one dataset, adapter, selection and eval-report asset
per cell and configuration, and tests can check the matrix without Dagster.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeAlias

from saturated_dag.config import Profile, TestbedSettings, TrainingSettings
from saturated_dag.data.questions import QuestionSets, can_train_split
from saturated_dag.infra.parallel import step_layout
from saturated_dag.methods import METHODS, methods_reading

DATASET_OF_METHOD = {m.name: m.dataset for m in METHODS.values()}
RRHF_VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "no_sft": {"rrhf_use_sft": False},
    "no_hinge": {"rrhf_hinge": False},
    "no_logistic": {"rrhf_logistic_weight": False},
}
SWEEP_TITLES = {
    "rank_weight": "σ-RRHF rank-loss weight λ (Figure 6)",
    "rrhf_variants": "σ-RRHF variants (Table 8)",
    "dpo_beta": "DPO β and learning-rate sweep (Table 9)",
}


SUFFIX = {"rrhf_rank_weight": "lambda", "dpo_loss_type": "loss-", "dpo_beta": "beta",
          "dpo_nll_weight": "nll", "learning_rate": "lr", "epochs": "ep", "batch_size": "bs",
          "seed": "seed"}
DATA_SEED_SUFFIX = "data"
"""An adapter's data seed in its name and partition key (``data1``); also the data-seed partition
keys of the pool-side assets (``data_seed_key``)."""
SWITCHES = {"rrhf_use_sft": "sft", "rrhf_hinge": "hinge", "rrhf_logistic_weight": "logistic"}
ORDER = (*SWITCHES, "rrhf_rank_weight", "dpo_loss_type", "dpo_beta", "dpo_nll_weight",
         "learning_rate", "epochs", "batch_size", "seed")
"""The order of a name's suffixes: one setting, one place, whichever path set it."""
SELECTION_LISTS = {"learning_rates": "learning_rate", "epochs": "epochs",
                   "batch_sizes": "batch_size", "dpo_betas": "dpo_beta",
                   "dpo_loss_types": "dpo_loss_type", "dpo_nll_weights": "dpo_nll_weight",
                   "rrhf_rank_weights": "rrhf_rank_weight"}
"""Selection list -> the training setting it varies."""
SELECTION_LIST_METHODS = {name: methods_reading(setting)
                          for name, setting in SELECTION_LISTS.items()}
"""Selection lists that apply only to some methods (the others vary every method's setting)."""


def number_text(value: float) -> str:
    """The number as it appears in names and labels: short (``0.01``, ``5e-06``) and exact.

    ``:g`` keeps six significant digits, so ``1.2345678e-05`` and ``1.2345671e-05`` would name
    one adapter; where ``:g`` does not read back as ``value``, the exact ``repr`` is used, so
    distinct settings always give distinct names and ``float(text) == value``.
    """
    text = f"{value:g}"
    return text if float(text) == value else repr(float(value))


def setting_text(key: str, value: Any) -> str:
    """A varied setting as a name's or partition key's part: its ``SUFFIX``, then the value
    (``lr0.0003``, ``beta5``; a loss type by its name, ``loss-ipo``)."""
    return f"{SUFFIX[key]}{value if isinstance(value, str) else number_text(value)}"


_VALIDATED: dict[tuple[str, str], TrainingSettings] = {}
"""Each (settings, update) pair validated so far, by its JSON text: a plan asks for one
configuration's settings once per adapter and per partition key (the ``paper`` profile 3,208
times for 341 distinct updates), and each validation costs milliseconds."""
_VALIDATED_MAX = 10_000


def _validated(base: TrainingSettings, update: dict[str, Any]) -> TrainingSettings:
    """``base`` with ``update`` laid over it, validated as a whole (``model_copy`` alone checks
    nothing: a misspelt or out-of-range override would reach the trainer), once per distinct
    pair (the settings are frozen, so one instance serves every caller)."""
    key = (base.model_dump_json(), json.dumps(update, sort_keys=True, default=repr))
    found = _VALIDATED.get(key)
    if found is None:
        found = TrainingSettings.model_validate({**base.model_dump(), **update})
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        _VALIDATED[key] = found
    return found


@dataclass(frozen=True)
class Experiment:
    """One adapter, or one cell (a table row): trained with ``method`` on ``split``, from the
    dataset ``dataset``.

    ``overrides`` replace fields of the profile's ``training`` section (a sweep's λ, β,
    learning rate or σ-RRHF switch) and name it; a setting equal to the profile's own is left
    out, so one configuration has one name and one adapter, shared by every cell that trains it.

    Two fields belong to cells only (adapters leave them empty):

    - ``pinned``: settings a sweep row fixes at the profile's own value while the selection
      varies them (Table 9's β = 0.1 when ``training.selection`` has ``dpo_betas``). Without
      them the row would be the main cell and select over the very value it exists to fix; with them
      it keeps that value and gets a name of its own.
    - ``seeds``: the row's training seeds when they differ from ``training.replicates``
      (Figure 6's λ = 0, the mean of three runs in App. C.2).
    - ``recipe_from``: with ``training.recipes``, the cell whose selection chooses this cell's
      configuration: its name, ``<split>/<name>`` when it is of another split
      (``recipes.split``); the cell then trains that one recipe over its training seeds (its
      adapter asset reads the choice as an input).

    ``recipe`` belongs to adapters only: the recipe a ``recipe_from`` cell's adapter trains,
    laid over its settings when the step runs. It is not in the name (the adapter's home stays
    put; its cache key holds the recipe, so a new choice trains a new key folder).

    ``data_seed`` belongs to adapters only: the draw of the data (``Profile.data_seeds``) whose
    dataset the adapter trains on; a replicate like the training seed, named ``_data<d>`` for
    d > 0 (data seed 0's adapters keep the names of a one-draw profile's).
    """

    split: str
    method: str
    scorer: str | None  # None: no quality ranking (SFT; random correctness pairs)
    dataset: tuple[str, ...]  # asset key path below the task
    overrides: tuple[tuple[str, Any], ...] = ()
    pinned: tuple[tuple[str, Any], ...] = ()
    seeds: int | None = None
    recipe_from: str | None = None
    recipe: tuple[tuple[str, Any], ...] = ()
    data_seed: int = 0

    @property
    def name(self) -> str:
        if self.split == "hard" and self.method == "dpo":
            base = f"dpo_correctness_{self.scorer}"
        else:
            base = self.method if self.scorer is None else f"{self.method}_{self.scorer}"
        parts = [base]
        named = self.fixed
        for key in (k for k in ORDER if k in named):
            value = named[key]
            if key in SWITCHES:
                parts.append(f"{'with' if value else 'no'}_{SWITCHES[key]}")
            else:
                parts.append(setting_text(key, value))
        if self.data_seed:
            parts.append(f"{DATA_SEED_SUFFIX}{self.data_seed}")
        return "_".join(parts)

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.overrides)

    @property
    def fixed(self) -> dict[str, Any]:
        """What the cell holds whatever its selection lists say: its overrides and pins."""
        return dict((*self.overrides, *self.pinned))

    def with_settings(self, base: TrainingSettings, settings: dict[str, Any]) -> Experiment:
        """The adapter of this cell with ``settings`` laid over its own, in canonical order; a
        setting equal to the profile's is left out, so one configuration has one name and one
        adapter (an adapter has no pins or seeds of its own: those say what a cell trains)."""
        return Experiment(self.split, self.method, self.scorer, self.dataset,
                          canonical(base, {**self.settings, **settings}))

    def with_recipe(self, recipe: dict[str, Any]) -> Experiment:
        """This adapter trained with ``recipe`` (a ``recipe_from`` cell's chosen settings)
        laid over its own; its name is unchanged."""
        unknown = set(recipe) - set(ORDER)
        if unknown:
            raise ValueError(f"not a per-adapter training setting: {sorted(unknown)}")
        return replace(self, recipe=tuple((k, recipe[k]) for k in ORDER if k in recipe))

    def training(self, base: TrainingSettings) -> TrainingSettings:
        """The profile's training settings with this cell's overrides (and an adapter's
        recipe) applied (a selection batch size smaller than the per-device batch also lowers the
        per-device batch to fit), validated: the one place the overrides are merged, so a bad
        override is refused here, naming its field, before anything trains."""
        if not self.overrides and not self.recipe:
            return base
        update = {**dict(self.overrides), **dict(self.recipe)}
        if "batch_size" in update:
            update["per_device_batch_size"] = math.gcd(update["batch_size"],
                                                       base.per_device_batch_size)
        return _validated(base, update)


def varied_keys(training: TrainingSettings, method: str) -> set[str]:
    """The training settings ``training.selection`` varies for ``method``'s cells."""
    lists = training.selection
    return {key for name, key in SELECTION_LISTS.items() if getattr(lists, name) is not None
            and method in SELECTION_LIST_METHODS.get(name, {method})}


def canonical(base: TrainingSettings, settings: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``settings`` minus those equal to ``base``'s, in the order of ``ORDER``."""
    current = base.model_dump()
    unknown = set(settings) - set(ORDER)
    if unknown:
        raise ValueError(f"not a per-adapter training setting: {sorted(unknown)}")
    return tuple((k, settings[k]) for k in ORDER if k in settings and current[k] != settings[k])


Cell: TypeAlias = Experiment
"""A row of the experiment plan: one (split, method, scorer) of a table, or a sweep's row
(``task_cells``); its adapter asset, selection and eval report share its name. The fields
``pinned``, ``seeds`` and ``recipe_from`` are a cell's."""
Configuration: TypeAlias = Experiment
"""One combination of the values ``training.selection`` lists that a cell trains
(``configurations``): seed 0, data seed 0; its adapters are its replicates."""
Adapter: TypeAlias = Experiment
"""One trained LoRA: a configuration with one data seed and one training seed
(``replicates``). The fields ``recipe`` and ``data_seed`` are an adapter's.

Why three names for one class and not three classes: a configuration whose settings equal a
cell's is that cell (a cell without a selection trains itself), and a sweep row equal to a main
cell's configuration shares its adapters; both rest on a cell, a configuration and an adapter of
the same settings being equal and hashing alike, which a class per role would break. So the
roles are names, in every signature and in ``TaskPlan``: ``dict[Cell, dict[Configuration,
list[Adapter]]]``."""


@dataclass(frozen=True)
class SweepRow:
    """One row of a sweep's table: its settings and its cell (its label on a page is
    ``reporting.labels.sweep_row_label``)."""

    settings: dict[str, Any] = field(hash=False)
    experiment: Cell


def _dataset(split: str, method: str, scorer: str) -> tuple[str, ...]:
    if split == "hard" and method == "dpo":
        return (split, "correctness_pairs", scorer)
    return (split, DATASET_OF_METHOD[method], scorer)


HARD_PAIRS_SHUFFLED = "shuffled"
"""The hard split's pairs whose sides were swapped on half the questions (the negative arm of
its known-signal control, ``training.hard_pair_control``)."""


def hard_pair_picks(training: TrainingSettings) -> tuple[str, ...]:
    """How the hard split's DPO cells pick their correct-vs-incorrect pairs (App. C.1: at
    random, and by the self-judge when DPO's scorers include it; with ``hard_pair_control``,
    also the random pairs shuffled). A profile whose DPO reads no self-judge (the
    ``dpo_diagnosis`` profile: the oracle and its shuffle) trains no self-judge pairs, and so
    runs no self-judge tournament."""
    judged = "self_judge" in training.method_scorers.get("dpo", training.scorers)
    return ("random", *(("self_judge",) if judged else ()),
            *((HARD_PAIRS_SHUFFLED,) if training.hard_pair_control else ()))


def correctness_pins(training: TrainingSettings) -> tuple[tuple[str, Any], ...]:
    """What the hard split's correctness-pair cells hold while the selection varies it: the
    profile's own DPO loss (the paper's sigmoid) whenever ``selection.dpo_loss_types`` is
    set. The loss family is compared on the signal beyond correctness (the ranked cells);
    correctness is DPO's known signal, the check that DPO itself learns here, read at its own
    loss (the ``dpo_diagnosis`` profile). The pin names the cell
    (``dpo_correctness_random_loss-sigmoid``)."""
    if training.selection.dpo_loss_types is None:
        return ()
    return (("dpo_loss_type", training.dpo_loss_type),)


def main_matrix(training: TrainingSettings) -> list[Cell]:
    """Tables 1, 2 and 7: every (split, method, scorer) the profile asks for (a method's
    scorers: ``training.method_scorers``, else ``training.scorers``); with
    ``training.recipes``, each cell names the cell its recipe is chosen on (``recipe_from``)."""
    cells: list[Cell] = []
    for split in training.splits:
        for method in training.methods:
            if method == "sft":
                cells.append(Experiment(split, "sft", None, (split, "sft_set")))
            elif split == "hard":  # App. C.1
                if method == "dpo":  # correct vs incorrect pairs, at the profile's own loss
                    for pick in hard_pair_picks(training):
                        cells.append(Experiment(split, "dpo", pick, _dataset(split, "dpo", pick),
                                                pinned=correctness_pins(training)))
                elif method == "rrhf":  # ranked by the self-judge, correct above incorrect
                    cells.append(Experiment(split, "rrhf", "self_judge",
                                            _dataset(split, "rrhf", "self_judge")))
            else:
                for scorer in training.method_scorers.get(method, training.scorers):
                    cells.append(Experiment(split, method, scorer,
                                            _dataset(split, method, scorer)))
    return cells if training.recipes is None else _with_recipes(training, cells)


def recipe_cell_of(training: TrainingSettings, cells: list[Cell], split: str,
                   method: str) -> Cell:
    """The cell ``method``'s recipe is chosen on for ``split`` (``training.recipes``): its
    cell ranked by ``recipes.scorer`` (SFT's own, unranked, cell for SFT), or that of the
    method it borrows from, in ``recipes.split`` when set, else in ``split`` itself."""
    assert training.recipes is not None
    split = training.recipes.split or split
    source = training.recipes.borrow.get(method, method)
    scorer = training.recipes.scorer if METHODS[source].ranked else None
    for cell in cells:
        if (cell.split, cell.method, cell.scorer) == (split, source, scorer):
            return cell
    raise ValueError(
        f"training.recipes: {method} on the {split} split takes its recipe from "
        f"{source}'s cell ranked by {scorer or 'nothing'}, which the main matrix does not "
        f"have; add {scorer!r} to training.scorers (or training.method_scorers.{source})"
        if scorer else f"training.recipes: add {source} to training.methods")


def recipe_settings(training: TrainingSettings, source: Experiment, method: str,
                    chosen: dict[str, Any], fixed: Iterable[str] = ()) -> dict[str, Any]:
    """What a ``recipe_from`` cell of ``method`` trains: of the configuration its recipe
    cell ``source`` chose (``chosen``: the selection table's row, or the cell's own
    settings when it has one configuration), the settings ``source``'s selection varies that
    ``method`` reads (RAFT takes SFT's learning rate, never a β), less those the cell
    itself fixes (``fixed``: a sweep row's λ, β or η)."""
    keys = varied_keys(training, source.method) - set(source.fixed) - set(fixed)
    return {k: chosen[k] for k in ORDER if k in keys and k in chosen
            and method in methods_reading(k) and chosen[k] is not None}


def chosen_recipe(training: TrainingSettings, source: Experiment, method: str,
                  chosen: list[dict[str, Any]] | None, fixed: Iterable[str] = ()
                  ) -> dict[str, Any]:
    """The settings ``method``'s ``recipe_from`` cells train: the configuration their recipe
    cell ``source`` chose (``chosen``: the rows its selection table marks chosen, which must be
    one; None when it has one configuration, so the recipe is its own settings), less what the
    cell fixes itself (``fixed``: a sweep row's). The adapters and the testbed's analysis read
    it here."""
    if chosen is None:
        effective = source.training(training)
        row = {k: getattr(effective, k) for k in SELECTION_LISTS.values()}
    elif len(chosen) != 1:
        raise ValueError(f"the selection of {source.split}/{source.name} marks {len(chosen)} "
                         "configurations chosen; re-materialise it")
    else:
        row = chosen[0]
    return recipe_settings(training, source, method, row, fixed)


def recipe_reference(source: Cell, split: str) -> str:
    """How a cell of ``split`` names its recipe cell ``source`` (``Experiment.recipe_from``):
    by name in its own split, as ``<split>/<name>`` in another."""
    return source.name if source.split == split else f"{source.split}/{source.name}"


def _with_recipes(training: TrainingSettings, cells: list[Cell],
                  matrix: list[Cell] | None = None) -> list[Cell]:
    """``cells`` with their ``recipe_from``, each recipe cell looked up in ``matrix`` (the
    main matrix; ``cells`` themselves by default). A cell that is its own recipe cell, or
    whose selection varies nothing its settings leave open (a sweep row fixing β and η),
    keeps choosing for itself."""
    out = []
    for cell in cells:
        source = recipe_cell_of(training, matrix or cells, cell.split, cell.method)
        open_keys = varied_keys(training, cell.method) - set(cell.fixed)
        out.append(cell if source == cell or not open_keys
                   else replace(cell, recipe_from=recipe_reference(source, cell.split)))
    return out


def _cell(training: TrainingSettings, split: str, method: str, scorer: str,
          settings: dict[str, Any], seeds: int | None = None) -> Experiment:
    """A sweep row's cell: it fixes every key of ``settings`` whatever its value (a value equal
    to the profile's is pinned where the selection varies it), and trains ``seeds`` seeds."""
    overrides = canonical(training, settings)
    varied = varied_keys(training, method) - {k for k, _ in overrides}
    pinned = tuple((k, settings[k]) for k in ORDER if k in settings and k in varied)
    return Experiment(split, method, scorer, _dataset(split, method, scorer), overrides, pinned,
                      None if seeds is None or seeds == training.replicates else seeds)


def sweeps(training: TrainingSettings) -> dict[str, list[SweepRow]]:
    """The configured sweeps (App. C.2-C.4): their rows in order, each with its adapter; with
    ``training.recipes``, a row trains its method's recipe in the settings it leaves open."""
    out = _sweep_rows(training)
    if training.recipes is None or not out:
        return out
    matrix = main_matrix(training)
    return {name: [replace(row, experiment=_with_recipes(training, [row.experiment], matrix)[0])
                   for row in rows] for name, rows in out.items()}


def _sweep_rows(training: TrainingSettings) -> dict[str, list[SweepRow]]:
    configured = training.sweeps
    out: dict[str, list[SweepRow]] = {}
    if configured.rank_weight is not None:
        s = configured.rank_weight
        out["rank_weight"] = [
            SweepRow({"lambda": v},
                     _cell(training, s.split, "rrhf", s.scorer, {"rrhf_rank_weight": v},
                           max(training.replicates, s.zero_replicates) if v == 0 else None))
            for v in s.values]
    if configured.rrhf_variants is not None:
        s = configured.rrhf_variants
        full = {"rrhf_use_sft": True, "rrhf_hinge": True, "rrhf_logistic_weight": True,
                "rrhf_rank_weight": (training.rrhf_rank_weight if s.rank_weight is None
                                     else s.rank_weight)}
        out["rrhf_variants"] = [
            SweepRow({"variant": variant},
                     _cell(training, s.split, "rrhf", s.scorer,
                           {**full, **RRHF_VARIANTS[variant]}))
            for variant in s.variants]
    if configured.dpo_beta is not None:
        s = configured.dpo_beta
        out["dpo_beta"] = [
            SweepRow({"beta": b, "lr": lr},
                     _cell(training, s.split, "dpo", s.scorer,
                           {"dpo_beta": b, "learning_rate": lr}))
            for b in s.betas for lr in s.learning_rates]
    return out


def experiment_matrix(training: TrainingSettings) -> list[Cell]:
    """Every cell the profile evaluates (main matrix, then sweeps), each once, stable order.

    A cell is what a table row reports; the adapters it trains are ``configurations`` x
    ``replicates`` (just the cell itself when it has one configuration and one seed).
    """
    cells = main_matrix(training)
    for rows in sweeps(training).values():
        cells += [row.experiment for row in rows]
    cells = list(dict.fromkeys(cells))
    named: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        other = named.setdefault((cell.split, cell.name), cell)
        if other != cell:  # one asset key, two meanings: refuse rather than pick one
            raise ValueError(f"two cells of split {cell.split!r} are named {cell.name!r} but "
                             f"train differently ({other.seeds or training.replicates} and "
                             f"{cell.seeds or training.replicates} training seeds)")
    return cells


def trainable_splits(profile: Profile, task: str) -> frozenset[str]:
    """The splits of the matrix's cells that ``task`` has (GSM8K has no strictly easier pool
    D_prime), each asked of the task once."""
    matrix = experiment_matrix(profile.training)
    return frozenset(s for s in {c.split for c in matrix} if can_train_split(profile, task, s))


def task_cells(profile: Profile, task: str) -> list[Cell]:
    """The cells ``task`` evaluates: every cell of the matrix whose split the task has."""
    splits = trainable_splits(profile, task)
    return [c for c in experiment_matrix(profile.training) if c.split in splits]


def table_rows(training: TrainingSettings) -> list[tuple[str | None, SweepRow | None, Cell]]:
    """Every table row in print order: the main matrix's (sweep ``None``), then each sweep's
    (its name and row), each with the cell it reports. The one enumeration the load-time
    checks (``row_labels``) and the plan (``saturated_dag.reporting.plan_text``) read."""
    rows: list[tuple[str | None, SweepRow | None, Cell]] = [
        (None, None, c) for c in main_matrix(training)]
    for sweep, found in sweeps(training).items():
        rows += [(sweep, row, row.experiment) for row in found]
    return rows


def _settings_text(settings: dict[str, Any]) -> str:
    """A sweep row's settings as an error names them (``lambda=0``, ``beta=0.1, lr=5e-06``)."""
    return ", ".join(f"{key}={number_text(v) if isinstance(v, float) else v}"
                     for key, v in settings.items())


def row_labels(training: TrainingSettings) -> list[tuple[str, Cell]]:
    """Every table row with the profile field that asks for it: the main matrix's rows
    (``training.splits/methods/scorers``), then each sweep's (``training.sweeps.<name>``)."""
    return [(f"main matrix row {c.split}/{c.name}" if row is None else
             f"training.sweeps.{sweep} row {_settings_text(row.settings)} ({c.split}/{c.name})",
             c)
            for sweep, row, c in table_rows(training)]


def inert(training: TrainingSettings, adapter: Adapter) -> bool:
    """An adapter whose loss and gradient are exactly 0, so training leaves the base model:
    σ-RRHF with no SFT term and rank-loss weight λ = 0."""
    effective = adapter.training(training)
    return (adapter.method == "rrhf" and not effective.rrhf_use_sft
            and effective.rrhf_rank_weight == 0)


def check_trainable(training: TrainingSettings, n: int) -> None:
    """Refuse a profile any of whose rows would train an adapter identical to the base model
    (``inert``): selection would prefer it whenever training hurts, and its row would read as
    the base model's (Table 8's no-SFT row at λ = 0)."""
    for label, cell in row_labels(training):
        bad = [a.name for a in configurations(training, cell, n) if inert(training, a)]
        if bad:
            raise ValueError(
                f"{label} would train {bad[0]} with no SFT term and rank-loss weight λ = 0: "
                "its loss and gradient are exactly 0, so the adapter is the base model; give "
                "the row λ > 0 (training.sweeps.rrhf_variants.rank_weight, "
                "training.rrhf_rank_weight) or drop 0 from training.selection.rrhf_rank_weights")


def _usable_batch(training: TrainingSettings, method: str, batch: int, n: int) -> bool:
    """σ-RRHF keeps a question's n completions in one forward pass: its batch must hold a
    whole per-device batch of at least n."""
    if method != "rrhf":
        return True
    return batch >= n and batch % training.per_device_batch_size == 0


def configurations(training: TrainingSettings, cell: Cell, n: int) -> list[Configuration]:
    """The configurations of ``cell`` (App. B): every combination of the values
    ``training.selection`` lists, seed 0 of each; ``[cell]`` when it lists none. Settings the cell
    fixes (a sweep row's λ, β, learning rate) are not varied; ``n`` is the samples per question
    (σ-RRHF batch sizes)."""
    if cell.recipe_from is not None:  # trains the recipe its recipe cell chooses
        return [cell]
    lists = training.selection
    fixed = set(cell.fixed)
    axes: list[list[tuple[str, Any]]] = []
    for name, key in SELECTION_LISTS.items():
        values = getattr(lists, name)
        if values is None or key in fixed or cell.method not in SELECTION_LIST_METHODS.get(
                name, {cell.method}):
            continue
        if key == "batch_size":
            values = [b for b in values if _usable_batch(training, cell.method, b, n)]
            if not values:
                raise ValueError(f"training.selection.batch_sizes {lists.batch_sizes}: none "
                                 f"fits {cell.method} (at least sampling.n={n} and a multiple "
                                 f"of per_device_batch_size={training.per_device_batch_size})")
        axes.append([(key, v) for v in values])
    points = [cell.with_settings(training, dict(point)) for point in itertools.product(*axes)]
    return list(dict.fromkeys(points)) or [cell]


def replicates(training: TrainingSettings, configuration: Configuration,
               count: int | None = None, data_seeds: int = 1) -> list[Adapter]:
    """The replicates of one configuration: for each data seed 0, 1, ... (``data_seeds``, the
    profile's draws of the data), the training seeds ``seed``, ``seed + 1``, ...; ``count``
    of them, ``training.replicates`` unless the cell asks for its own (``Experiment.seeds``).
    Replicate 0 is the configuration itself."""
    return [replace(configuration.with_settings(training, {"seed": training.seed + r}),
                    data_seed=d)
            for d in range(data_seeds) for r in range(count or training.replicates)]


def cell_adapters(training: TrainingSettings, cell: Cell, n: int,
                  data_seeds: int = 1) -> dict[Configuration, list[Adapter]]:
    """The cell's configurations (configuration order), each with its replicates (data seeds x
    training seeds): the adapters the cell trains; more than one configuration means a
    selection."""
    return {config: replicates(training, config, cell.seeds, data_seeds)
            for config in configurations(training, cell, n)}


def trained_adapters(training: TrainingSettings, cells: list[Cell],
                     n: int, data_seeds: int = 1) -> list[Adapter]:
    """Every adapter the cells train, each once (a sweep row equal to a main cell's
    configuration shares its adapters), stable order."""
    return distinct_adapters(cell_adapters(training, cell, n, data_seeds) for cell in cells)


def _named_settings(training: TrainingSettings, cell: Cell) -> set[str]:
    """The settings that tell ``cell``'s adapters apart: those its selection varies (none for a
    ``recipe_from`` cell), and the training seed."""
    varied = set() if cell.recipe_from is not None else (
        varied_keys(training, cell.method) - set(cell.fixed))
    return varied | {"seed"}


def adapter_partition_key(training: TrainingSettings, cell: Cell, adapter: Adapter,
                          data_seeds: int = 1) -> str:
    """The name of one adapter of ``cell`` among the cell's adapters: the settings the cell's
    selection varies, its data seed (when the profile has several) and its training seed, always
    written out (``lr0.0003_seed0``; ``seed0`` when only the seed varies; ``lr0.0003_data1_seed0``).
    It is the adapter's Dagster partition key of the cell's adapter asset; cells of one method and
    one set of configurations share their keys, so they share a partitions definition and can train
    in one run. Every page and figure of the cell names the adapter by it."""
    effective = adapter.training(training)
    named = _named_settings(training, cell)
    parts = [setting_text(key, getattr(effective, key)) for key in ORDER if key in named]
    if data_seeds > 1:
        parts.insert(len(parts) - 1, data_seed_key(adapter.data_seed))
    return "_".join(parts)


def configuration_key(training: TrainingSettings, cell: Cell,
                      configuration: Configuration) -> str:
    """The name of one configuration of ``cell`` among the cell's configurations: its adapters'
    partition keys without the seeds (``beta0.1_lr0.0003`` for ``beta0.1_lr0.0003_seed0``),
    the cell's name when only the seed varies. The selection's table, its figure and the eval
    report name a configuration by it, so a configuration reads the same on the adapter's
    partitions, the selection and the report. (An adapter's folder and the runs table keep
    ``Experiment.name``, which names it across cells: a sweep row may reuse a main cell's
    adapter.)"""
    effective = configuration.training(training)
    named = _named_settings(training, cell) - {"seed"}
    return "_".join(setting_text(key, getattr(effective, key)) for key in ORDER
                    if key in named) or cell.name


def data_seed_key(data_seed: int) -> str:
    """Data seed ``data_seed`` as a Dagster partition key of the pool-side assets and in an
    adapter's partition key: ``data0``, ``data1``, ..."""
    return f"{DATA_SEED_SUFFIX}{data_seed}"


def data_seed_of(partition: str) -> int:
    """``data1`` -> 1 (``data_seed_key``'s inverse); anything else is refused by name."""
    digits = partition.removeprefix(DATA_SEED_SUFFIX)
    if partition == digits or not digits.isdigit():
        raise ValueError(f"{partition!r} is not a data-seed partition key "
                         f"({data_seed_key(0)}, {data_seed_key(1)}, ...)")
    return int(digits)


def distinct_adapters(trained: Iterable[dict[Configuration, list[Adapter]]]
                      ) -> list[Adapter]:
    """The adapters of cells' ``cell_adapters``, each once, in cell, configuration and seed
    order."""
    return list(dict.fromkeys(seeded for by_config in trained
                              for seeds in by_config.values() for seeded in seeds))


@dataclass(frozen=True)
class TaskPlan:
    """Everything one task of a profile runs: the one enumeration the graph
    (``assets.task_assets``), the cost table (``paper_cost``), the runs table, the nightly
    schedule and the printed plan (``saturated_dag.reporting.plan_text``) read.

    ``cells``: what the tables report (main matrix, then sweeps), each once. ``trained``: each
    cell's configurations with their training-seed replicates (``cell_adapters``). ``main``: the
    main matrix's cells. ``sweeps``: each configured sweep's rows. ``partitions``: each cell's
    adapters by partition key (``adapter_partition_key``), its adapter asset's Dagster partitions.
    """

    task: str
    cells: tuple[Cell, ...]
    trained: dict[Cell, dict[Configuration, list[Adapter]]] = field(hash=False)
    main: tuple[Cell, ...]
    sweeps: dict[str, list[SweepRow]] = field(hash=False)
    questions: QuestionSets = field(hash=False, compare=False)
    """The task's training, validation and eval questions and its eval set's name, each
    built on first use."""
    partitions: dict[Cell, dict[str, Adapter]] = field(hash=False, default_factory=dict)
    scorer_names: tuple[str, ...] = ()
    """The scorers the profile names (``Profile.scorer_names``): with the ones scored by
    default, those that apply to the task get a score asset (``scorers.builtin.task_scorers``;
    resolved there, so the plan's code does not import the scorers')."""
    judge_is_model: bool = False
    """Whether the strong judge is a model (else the rubric, which needs no engine)."""
    data_seeds: int = 1
    """Draws of training data: one partition each of the pool-side assets when several."""
    testbed: TestbedSettings | None = None
    """The testbed's analysis when the profile runs one on this task (chain sum only)."""
    checks_in_step: bool = False
    """Whether an adapter's checks run in its own step (each model step its own process,
    ``infra.parallel.step_layout``) rather than as checks of their own."""
    configuration_keys: dict[Cell, dict[str, str]] = field(hash=False, default_factory=dict)
    """Each cell's configurations, by name, -> their keys (``configuration_key``): how the
    selection, its figure and the eval report name a configuration."""

    @cached_property
    def partition_keys(self) -> dict[Cell, dict[Adapter, str]]:
        """Each cell's adapters -> their partition keys (``partitions`` read the other way)."""
        return {cell: {adapter: key for key, adapter in by_key.items()}
                for cell, by_key in self.partitions.items()}

    @property
    def adapters(self) -> list[Adapter]:
        """Every adapter the task trains, each once (a sweep row equal to a main cell's
        configuration shares its adapters), in cell, configuration and seed order."""
        return distinct_adapters(self.trained.values())

    @property
    def selections(self) -> list[Cell]:
        """The cells with more than one configuration: each has a selection."""
        return [cell for cell, by_config in self.trained.items() if len(by_config) > 1]

    @property
    def rows(self) -> list[tuple[str | None, SweepRow | None, Cell]]:
        """Every table row of the task in print order (``table_rows``' layout): the main
        matrix's (sweep ``None``), then each sweep's, each with the cell it reports."""
        return [*((None, None, c) for c in self.main),
                *((sweep, row, row.experiment) for sweep, found in self.sweeps.items()
                  for row in found)]

    @cached_property
    def sweep_configurations(self) -> dict[str, dict[Cell, list[Configuration]]]:
        """Each sweep's row cells with their configurations (a sweep table's inputs)."""
        return {sweep: {row.experiment: list(self.trained[row.experiment]) for row in rows}
                for sweep, rows in self.sweeps.items()}

    @cached_property
    def recipe_cells(self) -> dict[Cell, Cell]:
        """Each cell that trains another's recipe (``recipe_from``, ``training.recipes``) ->
        the cell whose selection chooses it."""
        return {cell: self.recipe_cell(cell) for cell in self.cells
                if cell.recipe_from is not None}

    def recipe_cell(self, cell: Cell) -> Cell | None:
        """The cell whose selection chooses ``cell``'s recipe (``training.recipes``), or
        None when the cell selects its own."""
        if cell.recipe_from is None:
            return None
        split, _, name = cell.recipe_from.rpartition("/")
        return next(c for c in self.cells
                    if c.split == (split or cell.split) and c.name == name
                    and c.recipe_from is None)

    @property
    def cells_by_partitions(self) -> dict[tuple[str, ...], list[Cell]]:
        """The cells of each distinct set of partition keys, in cell order: one partitions
        definition each, so the cells of one set can run in one Dagster run
        (``jobs/staged.py`` splits a job into parts by it)."""
        groups: dict[tuple[str, ...], list[Cell]] = {}
        for cell in self.cells:
            groups.setdefault(tuple(self.partitions[cell]), []).append(cell)
        return groups


def build_task_plan(profile: Profile, task: str) -> TaskPlan:
    """``task``'s plan under ``profile`` (``TaskPlan``)."""
    training, n, draws = profile.training, profile.sampling.n, profile.data_seeds
    splits = trainable_splits(profile, task)
    cells = tuple(c for c in experiment_matrix(training) if c.split in splits)
    trained = {cell: cell_adapters(training, cell, n, draws) for cell in cells}
    partitions: dict[Cell, dict[str, Adapter]] = {}
    for cell, by_config in trained.items():
        adapters = [seeded for seeds in by_config.values() for seeded in seeds]
        partitions[cell] = {adapter_partition_key(training, cell, a, draws): a
                            for a in adapters}
        if len(partitions[cell]) != len(adapters):  # two adapters, one partition key: refuse
            names = sorted(adapter_partition_key(training, cell, a, draws) for a in adapters)
            raise ValueError(f"the configurations of {cell.split}/{cell.name} name two "
                             f"adapters alike: {names}")
    return TaskPlan(
        task, cells, trained,
        tuple(c for c in main_matrix(training) if c.split in splits),
        {name: rows for name, rows in sweeps(training).items()
         if rows[0].experiment.split in splits}, QuestionSets(profile, task),
        partitions=partitions, scorer_names=tuple(profile.scorer_names()),
        judge_is_model=profile.judges.strong.kind != "rubric", data_seeds=draws,
        testbed=profile.testbed if task == "chain_sum" else None,
        checks_in_step=step_layout(profile).processes == "per_step",
        configuration_keys={cell: {config.name: configuration_key(training, cell, config)
                                   for config in by_config}
                            for cell, by_config in trained.items()})


_PLANS: dict[str, dict[str, TaskPlan]] = {}


def experiment_plan(profile: Profile) -> dict[str, TaskPlan]:
    """Task -> its plan, for every task of ``profile``; built once per profile content (the
    paper profile's 3,060 adapters are enumerated once per process, not by each reader).
    Readers must not change it."""
    key = profile.model_dump_json()
    if key not in _PLANS:
        if len(_PLANS) >= 16:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = {task: build_task_plan(profile, task) for task in profile.tasks}
    return _PLANS[key]
