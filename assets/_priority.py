"""The order a run takes its ready steps in, so the device changes hands as rarely as it can.

Dagster's executors start the ready step with the highest ``dagster/priority`` op tag first
(ties keep the plan's order). Untagged, a run interleaved its steps by plan order: an
adapter's ``loads_and_generates`` check (the policy's engine) between two trainings (which
release it), an eval report between them, the entropy route between two policy steps. Each
switch closes one engine and starts another: about 6 s for the rehearsal's tiny models on CPU,
tens of seconds to minutes for the paper's on a GPU, and 200+ adapters in ``paper``. With
these priorities a run loads the policy for the pool, the base report and the self-judge,
then the entropy route's copy, then the strong judge, trains every adapter whose dataset is
ready, and only then loads the policy again for the checks and eval reports of all of them
(the rehearsal's residency log counts the loads: docs/paper-run.md).
"""

from __future__ import annotations

PRIORITY_TAG = "dagster/priority"

POLICY_ENGINE = 40   # pool, base eval report, self-judge: the policy's first engine
TEACHER_ENGINE = 30  # teacher-forced entropy: a transformers copy of the policy
JUDGE_ENGINE = 20    # the strong judge's engine
TRAINING = 10        # adapters: no engine in this process while a child trains
AFTER_TRAINING = -10  # adapter checks and eval reports: the policy's engine with LoRA


def priority(level: int) -> dict[str, str]:
    """``op_tags`` for an asset or check decorator."""
    return {PRIORITY_TAG: str(level)}
