"""The one type of a log callback (``LogFn``): where the core reports progress a Dagster step
passes ``context.log.info`` and a script ``print``, so the core never imports Dagster."""

from collections.abc import Callable

LogFn = Callable[[str], None]
"""Takes one line of the run log."""
