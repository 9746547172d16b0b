"""Extra code locations of ``workspace.yaml``: views of the runs that README's other commands
record in the same instance (``scripts/run_testbed.sh``), beside ``definitions.py``'s."""
