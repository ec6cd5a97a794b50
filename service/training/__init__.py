"""Training one job: pure computation, no database and no HTTP.

The worker builds a ``TrainingSpec`` from a job row, loads the columns it names, and calls
``run_training`` in a child process; everything the model row needs comes back in a
``TrainingOutcome``. See ``docs/api.md`` ("Training semantics") for what is computed.
"""

from service.training.run import run_training
from service.training.spec import TrainingError, TrainingOutcome, TrainingSpec

__all__ = ["TrainingError", "TrainingOutcome", "TrainingSpec", "run_training"]
