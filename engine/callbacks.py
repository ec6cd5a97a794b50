"""The engine's only outward channel during ``fit``.

``fit(X, y, callbacks=[...])`` calls each callback after every finished iteration (a tree of
a forest, a boosting stage, a member of an ensemble) with a :class:`ProgressEvent`. A callback
aborts training by raising :class:`TrainingInterrupted`; the estimator then releases its
workers and re-raises, leaving itself unfitted. The service uses this for progress reports,
heartbeats and cancellation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Callback", "ProgressEvent", "TrainingInterrupted", "notify"]


class TrainingInterrupted(Exception):
    """Raised by a callback to stop ``fit`` cleanly (for example on cancellation)."""


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
        Scores known at this point, e.g. ``{"oob_score": 0.91}`` or ``{"train_loss": 0.3}``.
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


Callback = Callable[[ProgressEvent], None]


def notify(callbacks: Iterable[Callback] | None, event: ProgressEvent) -> None:
    """Send ``event`` to every callback; :class:`TrainingInterrupted` propagates."""
    for callback in callbacks or ():
        callback(event)
