"""Profiles: plain YAML a user can copy and edit, validated before any model loads.

``load_profile("demo")`` (``saturated_dag.profiles``) reads ``saturated_dag/profiles/demo.yaml``;
any other argument is a path to a YAML file of the same shape. Every error names the field, the
bad value and what is allowed (pydantic's message), prefixed with the profile it came from.

Three rules hold for every field: a number must be finite (``.inf``/``.nan`` are never a
setting anyone means), a boolean is accepted only where the field is a boolean (pydantic alone
would read ``n: true`` as ``n=1``), and ``trust_remote_code`` is granted only by the profile
file, for the model it names, never by an override (``load_profile``).

One module per group of sections: ``base`` (the strict base model and the shared types),
``tasks``, ``models`` (policy, judges), ``sampling`` (sampling, evaluation, partitions),
``scoring``, ``training``, ``sweeps``, ``testbed``, ``runtime`` (stages, execution, automation,
tracking), and ``profile``: the ``Profile`` that holds them, its checks across sections, the
scorers it names (``Profile.scorer_names``) and the sweeps (``SWEEPS``). Import every name from
here.
"""

from saturated_dag.config.base import ProfileError, TrainSplit
from saturated_dag.config.models import (
    JudgeSettings,
    PolicySettings,
    SelfJudgeSettings,
    StrongJudgeSettings,
    VllmSettings,
)
from saturated_dag.config.profile import SWEEPS, Profile, configured_sweeps
from saturated_dag.config.runtime import (
    TRACKING_STORE,
    AutomationSettings,
    ExecutionSettings,
    StageSettings,
    TrackingSettings,
)
from saturated_dag.config.sampling import EvaluationSettings, PartitionSettings, SamplingSettings
from saturated_dag.config.scoring import KnownAnswerScorer, ScoredSplit, Scorer, ScoringSettings
from saturated_dag.config.sweeps import (
    DpoBetaSweep,
    RankWeightSweep,
    RrhfVariant,
    RrhfVariantSweep,
    Sweep,
    SweepSettings,
)
from saturated_dag.config.tasks import (
    GRID_LIMIT,
    MAX_PER_CELL,
    TRAIN_SPLITS_HELP,
    ChainSumSettings,
    Grid,
    GridSpec,
    Gsm8kSettings,
    TaskName,
)
from saturated_dag.config.testbed import TestbedSettings
from saturated_dag.config.training import (
    DpoLossType,
    Method,
    RecipeSettings,
    SelectionSettings,
    TrainingSettings,
)

__all__ = [
    "GRID_LIMIT",
    "MAX_PER_CELL",
    "SWEEPS",
    "TRACKING_STORE",
    "TRAIN_SPLITS_HELP",
    "AutomationSettings",
    "ChainSumSettings",
    "DpoBetaSweep",
    "DpoLossType",
    "EvaluationSettings",
    "ExecutionSettings",
    "Grid",
    "GridSpec",
    "Gsm8kSettings",
    "JudgeSettings",
    "KnownAnswerScorer",
    "Method",
    "PartitionSettings",
    "PolicySettings",
    "Profile",
    "ProfileError",
    "RankWeightSweep",
    "RecipeSettings",
    "RrhfVariant",
    "RrhfVariantSweep",
    "SamplingSettings",
    "ScoredSplit",
    "Scorer",
    "ScoringSettings",
    "SelectionSettings",
    "SelfJudgeSettings",
    "StageSettings",
    "StrongJudgeSettings",
    "Sweep",
    "SweepSettings",
    "TaskName",
    "TestbedSettings",
    "TrackingSettings",
    "TrainSplit",
    "TrainingSettings",
    "VllmSettings",
    "configured_sweeps",
]
