"""Jobs, schedules and sensors."""

from jobs.demo import demo_job
from jobs.generation import generation_jobs

__all__ = ["demo_job", "generation_jobs"]
