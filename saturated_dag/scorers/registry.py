"""The scorer registry: every quality scorer a profile can name, in one place.

Why a registry: a scorer's name appears in profiles (``training.scorers``, a sweep's
``scorer``, ``scoring.known_answer_scorers``), in the graph (``<task>/<name>_scores``), in the
preference datasets it ranks and in the table rows trained on them. With one entry per scorer,
adding one is a module and a ``register`` call; the profile validates against the registry,
and the Dagster layer builds one asset per registered scorer the profile uses
(``scorers.builtin.registered``)
(``docs/extending.md`` adds a toy scorer this way, and ``tests/scorers/test_extending.py`` runs it
through to the results table).

Two kinds of scorer:

- **model scorers** (``compute`` is None): the self-judge and strong-judge tournaments and the
  policy's entropy. They need a model from the Dagster layer's inference resource, so their
  assets live there (``assets/quality_scores.py``); the registry holds their name and meaning.
- **computed scorers**: a pure function of the scored completions and the generation pool
  (``ScorerInputs``), such as the random baseline and the known-answer scorers. The Dagster
  layer builds their assets from the entry alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from saturated_dag.scorers.scored_completions import ScoredCompletions


@dataclass(frozen=True)
class ScorerInputs:
    """What a computed scorer reads: the scored completions (one rule for every scorer,
    ``scorers.scored_completions``), the whole generation pool, and the profile's
    ``scoring.random_seed``."""

    completions: ScoredCompletions
    pool: pl.DataFrame
    seed: int


@dataclass(frozen=True)
class Scored:
    """A computed scorer's output: one row per selected completion (``SCORE_COLUMNS`` first)
    and facts for the asset's page (numbers, strings, or a mapping shown as JSON)."""

    scores: pl.DataFrame
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScorerSpec:
    """One scorer.

    ``scored_by_default``: every profile scores it (the paper's four, compared in the
    agreement table); otherwise it is scored only where the profile names it.
    ``listed_in``: a profile field that must list it before training may rank by it (the
    known-answer scorers: ``scoring.known_answer_scorers``). ``tasks``: the tasks it applies
    to (None: every task). ``gpu``: its asset runs under the gpu concurrency limit.
    """

    name: str
    description: str
    compute: Callable[[ScorerInputs], Scored] | None = None
    scored_by_default: bool = False
    listed_in: str | None = None
    tasks: tuple[str, ...] | None = None
    gpu: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"scorer name {self.name!r} must be an identifier: it names "
                             "an asset, a dataset file and a table row")

    @property
    def asset_name(self) -> str:
        return f"{self.name}_scores"

    def applies_to(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


SCORERS: dict[str, ScorerSpec] = {}
"""Name -> scorer, in registration order (the order of the agreement table's columns)."""


def register(spec: ScorerSpec) -> ScorerSpec:
    """Add ``spec``; a second scorer under a taken name is refused (one name, one meaning)."""
    if spec.name in SCORERS:
        raise ValueError(f"scorer {spec.name!r} is already registered")
    SCORERS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a scorer (a test's toy scorer, when the test ends)."""
    SCORERS.pop(name)


BUILTIN_NAMES = ("entropy", "self_judge", "strong_judge", "random", "oracle", "oracle_rho75",
                 "oracle_rho50", "oracle_rho25", "oracle_rho0", "oracle_shuffled")
"""The built-in scorers' names (``scorers/builtin.py`` registers them; a test checks the two
agree). Kept here as names so that the profile (``config.Scorer``) validates against the
registry without importing the scorers' code: an edit to a scorer re-versions the assets that
run it, not every asset that reads a profile."""


def check_name(name: str) -> str:
    """``name`` if it is a built-in or registered scorer; otherwise an error naming them."""
    if name in BUILTIN_NAMES or name in SCORERS:
        return name
    known = list(dict.fromkeys([*BUILTIN_NAMES, *SCORERS]))
    raise ValueError(f"unknown scorer {name!r}; registered scorers: {', '.join(known)}")
