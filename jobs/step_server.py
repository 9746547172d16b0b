"""What the multiprocess executor's fork server loads once: the code location with its jobs
resolved, and the libraries a model step imports lazily (``jobs/executor.py``).

Each step process is forked from that server, so it starts with torch, transformers, TRL,
PEFT, Math-Verify, Dagster and the resolved job already in memory instead of importing and
building them again: about 5 s of imports, 0.4 s of job resolution and 0.4 s of TRL's
trainer modules per step on the demo (timed in one process, import by import).
"""

import definitions
from saturated_dag.tasks.verification import verify_answer

definitions.defs.get_repository_def().get_all_jobs()  # resolved here, inherited by each step

from peft import LoraConfig, get_peft_model  # noqa: E402,F401 - each adapter step's
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer  # noqa: E402,F401

import saturated_dag.training.rrhf_trainer  # noqa: E402
import saturated_dag.training.train  # noqa: E402,F401

verify_answer("The sum is \\boxed{12}.", "12", "math_verify")  # its parser's lazy imports
