"""The executor of every job that runs model steps: the profile's ``StepLayout``
(``saturated_dag/infra/parallel.py``).

The run's own process (the in-process executor) on an accelerator, where the policy engine
(vLLM or CUDA) loads once for all steps and stays resident (``resources/inference.py``), and on
CPU by default. With ``execution.model_steps: one_per_core`` on CPU, the multiprocess executor
runs one step per core at once, each in its own process with one torch thread
(``ExperimentResource`` sets it when the step starts). Those processes are forked from a
server that has already imported this code location and resolved its jobs
(``jobs/step_server.py``), so a step does not import torch, transformers, TRL and the asset
graph again.
"""

import dagster as dg

from saturated_dag.config import Profile
from saturated_dag.infra.parallel import step_layout

PRELOADED = ["jobs.step_server"]
"""What the step processes' fork server imports once (``jobs/step_server.py``)."""


def step_executor(profile: Profile) -> dg.ExecutorDefinition:
    """In-process, or multiprocess with one step per core (``execution.model_steps``)."""
    layout = step_layout(profile)
    if layout.processes == "run":
        return dg.in_process_executor
    return dg.multiprocess_executor.configured(
        {"max_concurrent": layout.steps,
         "start_method": {"forkserver": {"preload_modules": PRELOADED}}},
        name="multiprocess_executor")
