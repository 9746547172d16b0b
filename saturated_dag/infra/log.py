"""The one type of a log callback (``LogFn``): where the core reports progress a Dagster step
passes ``context.log.info`` and a script ``print``, so the core never imports Dagster."""

from collections.abc import Callable

LogFn = Callable[[str], None]
"""Takes one line of the run log."""


def time_left(elapsed: float, done: int, total: int) -> str:
    """The time a run still needs at the pace so far, as a log line states it (``~3 min
    left``): the training steps, completions and judge calls a progress line counts take
    about equal time, so the pace is the mean. Every progress line of a step that can run
    longer than a minute ends with it."""
    if done <= 0 or total <= done:
        return "done" if total <= done else "estimating"
    seconds = elapsed / done * (total - done)
    return f"~{seconds:.0f} s left" if seconds < 90 else f"~{seconds / 60:.0f} min left"
