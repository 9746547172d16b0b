"""The `dg` CLI's component folder (``[tool.dg.project] defs_module``): empty on purpose.

``dg dev`` checks the component YAML of a project's defs folder before it starts the UI, and
needs the folder to exist. This project has no components: its definitions are plain Python
in the repository root's ``definitions.py`` (``code_location_target_module``), and the core
package stays free of Dagster imports. Nothing is loaded from here.
"""
