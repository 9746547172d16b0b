"""The one owner of the accelerator: the policy's and the strong judge's engines.

``InferenceResource`` (resource key ``inference``) reads the policy and strong-judge settings
from the run's profile through the ``experiment`` resource, so a launchpad override of
``experiment.overrides.policy`` is what the engines load. Engines load lazily and stay for the
run (loaded once for all its steps); ``teardown_after_execution`` closes them.

Residency rule. An engine is *exclusive* when it is on a CUDA device or is a vLLM engine (vLLM
claims a fixed share of the device's memory and does not reliably give it back while its
process lives). At most one exclusive engine is loaded at a time: loading the strong judge on
CUDA closes the policy's engine, and the next ``policy_backend()`` closes the judge's. CPU
engines under transformers may stay side by side. None is held while a training process runs
(``release()`` before ``resources.training.train_with_pipes`` starts its child). The
teacher-forced entropy route is a third role under the same rule, exclusive whenever the policy
is. Every load and close is written to the run's residency log
(``<output_dir>/residency/<run id>.jsonl``, ``saturated_dag.infra.residency``), so the rule can
be checked on what happened.

(No ``from __future__ import annotations`` here: Dagster reads the ``ResourceDependency``
annotation itself when the class is created.)
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from resources.experiment import ExperimentResource
from saturated_dag.config import PolicySettings, ProfileError, StrongJudgeSettings
from saturated_dag.generation import GenerationBackend, open_backend
from saturated_dag.generation.base import ChatPrompting
from saturated_dag.generation.models import resolve as resolve_model
from saturated_dag.infra.residency import POLICY, STRONG_JUDGE, TEACHER, ResidencyLog
from saturated_dag.profiles.engine_context import (
    ContextTooShort,
    check_sampling_context,
    model_max_positions,
    policy_needs,
    resolve_context,
    strong_judge_needs,
)
from saturated_dag.scorers.judges import Judge, LlmJudge, RubricJudge


def vllm_options(settings: PolicySettings | StrongJudgeSettings, needs: Callable[[Any], list],
                 field: str, log: Any = None) -> dict[str, Any]:
    """The engine's vLLM options with ``max_model_len`` resolved against what it will serve
    (``saturated_dag.profiles.engine_context``): ``auto`` computed, a number too small refused
    with the numbers, before any weights load."""
    from transformers import AutoTokenizer

    from saturated_dag.generation.models import local_model_dir

    options = settings.vllm.model_dump()
    location = local_model_dir(str(settings.model))
    tokenizer = AutoTokenizer.from_pretrained(location,
                                              trust_remote_code=settings.trust_remote_code)
    found = needs(tokenizer)
    try:
        options["max_model_len"] = resolve_context(options["max_model_len"], found, field,
                                                   model_max_positions(location))
    except ContextTooShort as err:
        raise dg.Failure(str(err)) from None
    if log is not None:
        needed = "\n".join(f"  {n.describe()}" for n in found)
        log.info(f"{field}: {options['max_model_len'] or 'the model maximum'}; needed:\n{needed}")
    return options


def is_exclusive(backend: str, device: str) -> bool:
    """Whether an engine must be alone on the accelerator (CUDA, or any vLLM engine)."""
    return backend == "vllm" or device.startswith("cuda")


def current_step() -> str | None:
    """The key of the Dagster step running now in this thread (None outside a step)."""
    try:
        return dg.OpExecutionContext.get().get_step_execution_context().step.key
    except Exception:  # no step in scope (resource teardown, a test outside a run)
        return None


@dataclass
class _Loaded:
    key: str
    exclusive: bool
    engine: GenerationBackend


class EngineResidency:
    """Which engines are loaded, by role, under the residency rule (see the module doc);
    each load and close recorded in ``log``."""

    def __init__(self, log: ResidencyLog | None = None) -> None:
        self._loaded: dict[str, _Loaded] = {}
        self.log = log or ResidencyLog(None)

    def roles(self) -> list[str]:
        return sorted(self._loaded)

    def get(self, role: str, key: str, exclusive: bool,
            load: Callable[[], GenerationBackend], model: str = "") -> GenerationBackend:
        """The engine of ``role`` loaded under ``key``; loads it (after closing what the rule
        says must go) when it is missing or was loaded under another key."""
        held = self._loaded.get(role)
        if held is not None and held.key == key:
            return held.engine
        self.release(role)
        if exclusive:
            for other in [r for r, e in self._loaded.items() if e.exclusive]:
                self.release(other)
        step = current_step()
        self.log.record("loading", role, step, exclusive=exclusive, model=model)
        try:
            engine = load()
        except BaseException:
            self.log.record("closed", role, step, failed=True)
            raise
        self.log.record("loaded", role, step, model=model)
        self._loaded[role] = _Loaded(key, exclusive, engine)
        return engine

    def release(self, role: str | None = None) -> None:
        """Close one role's engine, or every engine (``None``)."""
        for name in [role] if role is not None else list(self._loaded):
            held = self._loaded.pop(name, None)
            if held is not None:
                held.engine.close()
                self.log.record("closed", name, current_step())


class InferenceResource(dg.ConfigurableResource):
    """The policy and strong-judge engines of a run (residency rule: see the module doc).

    ``experiment`` is the run's ``ExperimentResource``: pass the same object that is bound to
    the ``experiment`` key (``resources.make_resources`` does), so launch-time config reaches both.
    """

    experiment: dg.ResourceDependency[ExperimentResource]

    _engines: EngineResidency | None = PrivateAttr(None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        log = ResidencyLog(Path(self.experiment.output_dir) / "residency"
                           / f"{context.run_id}.jsonl") if context.run_id else None
        self._engines = EngineResidency(log)

    @property
    def residency_log(self) -> ResidencyLog:
        """Where this run's loads, closes and training children are written down."""
        return self._residency().log

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.release()

    def _residency(self) -> EngineResidency:
        if self._engines is None:
            raise dg.DagsterInvariantViolationError(
                "InferenceResource was used outside a run: its engines live between Dagster's "
                "setup_for_execution and teardown_after_execution (use dg.build_resources)")
        return self._engines

    def loaded_roles(self) -> list[str]:
        """The roles whose engines are loaded now (``policy``, ``strong_judge``)."""
        return self._residency().roles()

    def policy_settings(self) -> PolicySettings:
        """The profile's policy, validated: an unknown model name or a missing path fails
        here, naming it, before anything loads."""
        try:
            policy = self.experiment.settings.policy
            resolve_model(policy.model)
        except (ProfileError, ValueError, FileNotFoundError) as err:
            raise dg.Failure(f"policy: {err}") from None
        return policy

    def strong_judge_settings(self) -> StrongJudgeSettings:
        return self.experiment.settings.judges.strong

    def policy_backend(self, log: Any = None) -> GenerationBackend:
        """The policy's engine, loaded on first use and kept for the run."""
        engines = self._residency()
        settings = self.policy_settings()
        seed = self.experiment.settings.sampling.seed

        def load() -> GenerationBackend:
            if log is not None:
                log.info(f"loading {settings.model} on {settings.backend} ({settings.device})")
            options = settings.vllm.model_dump()
            if settings.backend == "vllm":
                profile = self.experiment.settings
                options = vllm_options(settings, lambda tok: policy_needs(profile, tok),
                                       "policy.vllm.max_model_len", log)
            backend = open_backend(
                settings.backend, settings.model, dtype=settings.dtype, device=settings.device,
                batch_size=settings.batch_size, chat_template=settings.chat_template,
                trust_remote_code=settings.trust_remote_code, seed=seed,
                vllm_options=options)
            if isinstance(backend, ChatPrompting):
                backend.enable_thinking = settings.enable_thinking
            model = getattr(backend, "model", None)
            if settings.backend == "transformers" and model is not None:  # prompts fit
                config = model.config
                try:
                    check_sampling_context(self.experiment.settings, backend.tokenizer,
                                           getattr(config, "max_position_embeddings", None),
                                           settings.model)
                except ContextTooShort as err:
                    backend.close()
                    raise dg.Failure(str(err)) from None
            return backend

        return engines.get(POLICY, f"{settings.model_dump_json()}|seed={seed}",
                           is_exclusive(settings.backend, settings.device), load,
                           model=settings.model)

    def policy_teacher(self, log: Any = None) -> GenerationBackend:
        """The policy under transformers, for teacher-forced entropy: the policy's own engine
        when that is transformers, else a transformers copy under its own role, exclusive
        whenever the policy is (on a GPU it shares the device the vLLM engine would hold), so
        loading it closes the vLLM engine first."""
        settings = self.policy_settings()
        if settings.backend == "transformers":
            return self.policy_backend(log)
        from saturated_dag.generation.transformers_backend import TransformersBackend

        def load() -> GenerationBackend:
            if log is not None:
                log.info(f"teacher-forced entropy: loading {settings.model} in transformers")
            return TransformersBackend.load(settings.model, settings.dtype, settings.device,
                                            chat_template=settings.chat_template,
                                            trust_remote_code=settings.trust_remote_code)

        return self._residency().get(TEACHER, settings.model_dump_json(),
                                     is_exclusive(settings.backend, settings.device), load,
                                     model=settings.model)

    def strong_judge(self, max_new_tokens: int, batch_size: int | None = None,
                     log: Any = None) -> Judge:
        """The strong judge: the chain-sum rubric, or an LLM on its own engine."""
        settings = self.strong_judge_settings()
        if settings.kind == "rubric":
            return RubricJudge()
        seed = self.experiment.settings.sampling.seed

        def load() -> GenerationBackend:
            if log is not None:
                log.info(f"loading strong judge {settings.model} on {settings.backend} "
                         f"({settings.device})")
            options = settings.vllm.model_dump()
            if settings.backend == "vllm":
                profile = self.experiment.settings
                options = vllm_options(settings, lambda tok: strong_judge_needs(profile, tok),
                                       "judges.strong.vllm.max_model_len", log)
            return open_backend(
                settings.backend, str(settings.model), dtype=settings.dtype,
                device=settings.device, batch_size=settings.batch_size,
                chat_template=settings.chat_template,
                trust_remote_code=settings.trust_remote_code, seed=seed,
                vllm_options=options)

        backend = self._residency().get(
            STRONG_JUDGE, f"{settings.model_dump_json()}|seed={seed}",
            is_exclusive(settings.backend, settings.device), load, model=str(settings.model))
        return LlmJudge(backend, instruct=settings.instruct, max_new_tokens=max_new_tokens,
                        batch_size=batch_size or settings.batch_size, name="strong_judge")

    def release(self) -> None:
        """Close every engine (before a training process starts; at the end of the run)."""
        if self._engines is not None:
            self._engines.release()
