"""Jobs, schedules and sensors."""

from jobs.demo import demo_job
from jobs.generation import generation_jobs
from jobs.nightly import eval_targets, nightly_evaluation_job, nightly_evaluation_schedule
from jobs.paper import paper_jobs
from jobs.pretrain import pretrain_base_model
from jobs.study import study_job
from jobs.testbed import testbed_jobs

__all__ = ["demo_job", "eval_targets", "generation_jobs", "nightly_evaluation_job",
           "nightly_evaluation_schedule", "paper_jobs", "pretrain_base_model", "study_job",
           "testbed_jobs"]
