"""The ``study`` code location of ``workspace.yaml``: the embedded study's whole graph
(``study/chain_sum/...``) on the ``study`` profile and ``outputs/study``, what
``bash scripts/run_study.sh`` runs (``locations/__init__.py``)."""

from locations import extra_location

defs = extra_location("study", "outputs/study")
