"""The training worker: claims queued jobs, fits each in its own process, records the outcome.

See ``docs/api.md`` ("Jobs and workers") for how jobs move, leases and recovery.
"""

from service.worker.execution import JobFailed, JobSnapshot, TrainFunction, default_train
from service.worker.supervisor import Supervisor, WorkerConfig, run_worker

__all__ = [
    "JobFailed",
    "JobSnapshot",
    "Supervisor",
    "TrainFunction",
    "WorkerConfig",
    "default_train",
    "run_worker",
]
