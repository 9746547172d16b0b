"""Jobs, schedules and sensors."""

from jobs.demo import demo_job
from jobs.generation import generation_jobs
from jobs.pretrain import pretrain_base_model

__all__ = ["demo_job", "generation_jobs", "pretrain_base_model"]
