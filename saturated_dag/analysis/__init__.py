"""What the runs mean: the paper's findings with their licensing controls (``findings``), the
calibrated testbed (``testbed``), DPO's recipe search (``dpo_search``), methods at equal tuning
budget (``budget``) and the style shift (``behaviour``)."""
