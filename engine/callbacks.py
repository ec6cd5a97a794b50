"""The engine's only outward channel during ``fit``.

``fit(X, y, callbacks=[...])`` calls each callback after every finished iteration (a tree of
a forest, a boosting stage, a member of an ensemble) with a :class:`ProgressEvent`. A callback
answers in one of three ways:

- it returns None: training goes on;
- it returns :class:`StopTraining`: the estimator adds no more iterations and finishes as a
  fitted model with the iterations done so far (or the first ``keep`` of them), as a callback
  returning True ends XGBoost's ``train`` (Chen and Guestrin 2016).
  :class:`~engine.early_stopping.EarlyStopping` answers this way;
- it raises :class:`TrainingInterrupted`: the estimator releases its workers and re-raises,
  leaving itself unfitted. The service uses this for cancellation.

Stopping is an answer rather than an exception so that every callback hears every event,
including the one that ends training, and so that an estimator with nothing to stop (one tree,
a linear model's single solve) simply finishes; cancellation stays an exception because it
must unwind through everything and leave nothing behind.

The keys of :attr:`ProgressEvent.metrics` are named below; code that emits or reads them uses
these names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ESTIMATOR_ERROR",
    "ESTIMATOR_WEIGHT",
    "INERTIA",
    "LOG_LIKELIHOOD",
    "OOB_ERROR",
    "OOB_LOSS",
    "TRAIN_ERROR",
    "TRAIN_LOSS",
    "TRAIN_PREFIX",
    "VALIDATION_LOSS",
    "Callback",
    "ProgressEvent",
    "StopTraining",
    "TrainingInterrupted",
    "eval_set_metric",
    "eval_set_name",
    "notify",
    "train_metric",
]

# --- the keys of ProgressEvent.metrics --------------------------------------------------------
# All are lower-is-better except LOG_LIKELIHOOD. "Score" is kept for the higher-is-better
# figures the estimators store after fitting (``oob_score_``: accuracy or R²), so a key never
# shares a name with an attribute of the opposite sense.

#: Forests and bagging: the out-of-bag ensemble's misclassification rate (classification) or
#: mean squared error (regression) after each member (Breiman 2001; ``oob_curve_``).
OOB_ERROR = "oob_error"
#: Gradient boosting with ``subsample < 1``: the loss on the stage's out-of-bag rows.
OOB_LOSS = "oob_loss"
#: Gradient boosting, logistic regression, the perceptron: the training loss.
TRAIN_LOSS = "train_loss"
#: Gradient boosting with ``n_iter_no_change``: the loss on its held-out rows.
VALIDATION_LOSS = "validation_loss"
#: The AdaBoost family and arcing: the ensemble's training error.
TRAIN_ERROR = "train_error"
#: The AdaBoost family: the last member's weighted training error and its vote's weight.
ESTIMATOR_ERROR = "estimator_error"
ESTIMATOR_WEIGHT = "estimator_weight"
#: k-means: the best run's inertia so far.
INERTIA = "inertia"
#: Mixtures of experts (EM): the log-likelihood, higher is better.
LOG_LIKELIHOOD = "log_likelihood"
#: Every key starting with it is a training-set figure (``train_loss``, XGBoost's
#: ``train_logloss``): the service draws the training learning curve from it.
TRAIN_PREFIX = "train_"


def train_metric(name: str) -> str:
    """The key of metric ``name`` on the training rows, e.g. ``train_logloss``."""
    return f"{TRAIN_PREFIX}{name}"


def eval_set_name(index: int) -> str:
    """The name of the ``index``-th ``eval_set`` (XGBoost-style ``evals_result_``)."""
    return f"validation_{index}"


def eval_set_metric(index: int, name: str) -> str:
    """The key of metric ``name`` on the ``index``-th ``eval_set``, e.g. ``validation_0_rmse``."""
    return f"{eval_set_name(index)}_{name}"


@dataclass(frozen=True)
class StopTraining:
    """A callback's answer that ends training and keeps the model fitted so far.

    Attributes
    ----------
    keep : int or None
        How many of the iterations done to keep (e.g. the best iteration's number, as
        XGBoost's ``best_iteration + 1``), where the estimator's family allows dropping the
        last ones; None keeps them all.
    """

    keep: int | None = None

    def __post_init__(self) -> None:
        if self.keep is not None and self.keep < 1:
            raise ValueError(f"StopTraining keeps at least one iteration, not {self.keep}.")


class TrainingInterrupted(Exception):
    """Raised by a callback to abort ``fit`` (for example on cancellation); nothing is kept."""


@dataclass(frozen=True)
class ProgressEvent:
    """What one finished iteration reports.

    Attributes
    ----------
    estimator : str
        Class name of the estimator being fitted.
    done : int
        Iterations finished so far (trees, stages, members).
    total : int
        Iterations planned; ``done == total`` on the last event unless training stops early.
    metrics : Mapping[str, float]
        Figures known at this point, keyed by the names above, e.g. ``{OOB_ERROR: 0.09}`` or
        ``{TRAIN_LOSS: 0.3, VALIDATION_LOSS: 0.4}``.
    """

    estimator: str
    done: int
    total: int
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    @property
    def stage(self) -> str:
        return f"iteration {self.done}/{self.total}"


Callback = Callable[[ProgressEvent], StopTraining | None]


def notify(callbacks: Iterable[Callback] | None, event: ProgressEvent) -> StopTraining | None:
    """Send ``event`` to every callback; the request to stop, if any asked.

    Every callback hears the event even when an earlier one asked to stop. When several ask,
    the answer keeps the fewest iterations. :class:`TrainingInterrupted` propagates.
    """
    answers = [callback(event) for callback in callbacks or ()]
    stops = [answer for answer in answers if isinstance(answer, StopTraining)]
    if not stops:
        return None
    return min(stops, key=lambda stop: event.done if stop.keep is None else stop.keep)
