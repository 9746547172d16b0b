"""How numbers and sweep rows read on a page: a learning rate in scientific notation
(``3e-4``) and a sweep row's label (``λ=0.1``, ``no_sft``, ``β=0.1, η=3e-4``).

Why here and not in the plan: these are what a reader sees; the plan names its cells and
partitions with ``experiments.setting_text``, whose numbers (``experiments.number_text``) are
exact to the last digit, so two settings never share a name. A label may round (``scientific``
keeps three digits); a name may not."""

from collections.abc import Callable, Mapping
from typing import Any

from saturated_dag.experiments import SweepRow, number_text


def scientific(value: float | None) -> str | None:
    """``3e-4``, ``1.5e-5``: a learning rate as every table and label shows it, short and
    exact to three digits (names use ``number_text``, which is exact to the last digit)."""
    if value is None:
        return None
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


SWEEP_ROW_LABELS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "rank_weight": lambda s: f"λ={number_text(s['lambda'])}",
    "rrhf_variants": lambda s: str(s["variant"]),
    "dpo_beta": lambda s: f"β={number_text(s['beta'])}, η={scientific(s['lr'])}",
}
"""Each sweep's row label, from the row's settings (``SweepRow.settings``), keyed by
``config.SWEEPS``."""


def sweep_row_label(sweep: str, row: SweepRow) -> str:
    """Row ``row`` of sweep ``sweep`` as its table and the plan's page label it."""
    return SWEEP_ROW_LABELS[sweep](row.settings)
