"""The training-method registry: each method's name, table label, description, dataset and
its own settings, in one place.

Why: the tables, the plan, the cost table and the testbed show a method's label, the model card
its description, the experiment matrix its dataset, and the plan and the selection which
settings only it reads; each reads this entry, so a method is described once.
``config.Method`` lists the same names (a test checks both).

How a method trains (the columns its training set needs, its config builder, its trainer, what
its adapter's record holds) is its entry in ``training.config.METHOD_TRAINING``, keyed by the
same names: this module is the bottom of the core's import layers and is imported by the
light modules (tables, plan), so it imports nothing of the training stage, nor torch, TRL or
transformers. ``method`` is the one check of a method's name, for both tables. Adding a method
is one entry here and one there, and its dataset builder (``docs/extending.md``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MethodSpec:
    """One training method.

    ``dataset``: the preference-dataset kind it trains on (an asset key part,
    ``<task>/<split>/<dataset>/<scorer>``). ``ranked``: it reads a scorer's ranking (SFT does
    not). ``own_settings``: ``training`` settings only this method reads (the plan and the
    selection leave them out of other methods' rows).
    """

    name: str
    label: str
    description: str
    dataset: str
    ranked: bool = True
    own_settings: frozenset[str] = frozenset()


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("dpo", "DPO", "DPO (direct preference optimisation on chosen/rejected pairs)",
               "dpo_pairs", own_settings=frozenset({"dpo_beta", "dpo_nll_weight",
                                                     "dpo_loss_type"})),
    MethodSpec("rrhf", "σ-RRHF",
               "σ-RRHF (rank loss over every scored completion, plus an SFT term)",
               "rrhf_groups", own_settings=frozenset({
                   "rrhf_rank_weight", "rrhf_use_sft", "rrhf_hinge", "rrhf_logistic_weight"})),
    MethodSpec("sft", "SFT", "SFT (supervised fine-tuning on correct completions)", "sft_set",
               ranked=False),
    MethodSpec("raft", "RAFT",
               "RAFT (supervised fine-tuning on the scorer's best completion per question)",
               "raft_set"),
)}
"""Method name -> entry, in the order tables list methods."""


def method(name: str) -> MethodSpec:
    """The registered method ``name``; an unknown name is an error naming the known ones."""
    if name not in METHODS:
        raise ValueError(f"unknown training method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


def label(name: str) -> str:
    """The method's label in tables (``σ-RRHF``), or the name itself when unregistered."""
    return METHODS[name].label if name in METHODS else name


def methods_reading(setting: str) -> set[str]:
    """The methods that read training setting ``setting``: the one that owns it, or all."""
    owners = {m.name for m in METHODS.values() if setting in m.own_settings}
    return owners or set(METHODS)
