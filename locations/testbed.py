"""The ``testbed`` code location of ``workspace.yaml``: the calibrated testbed's whole graph
(``testbed/chain_sum/...``, its verdicts on ``testbed/chain_sum/testbed_validation``) on the
``testbed`` profile and ``outputs/testbed``, what ``bash scripts/run_testbed.sh`` runs
(``locations/__init__.py``)."""

from locations import extra_location

defs = extra_location("testbed", "outputs/testbed")
