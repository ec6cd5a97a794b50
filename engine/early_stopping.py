"""One early-stopping callback for every family that trains iteration by iteration.

:class:`EarlyStopping` watches one figure of the :class:`~engine.callbacks.ProgressEvent`
metrics (a forest's out-of-bag error, a boosting model's validation loss) and ends training
with :class:`~engine.callbacks.StopTraining` once it stops improving — the held-out
monitoring of Prechelt (1998), used by every gradient boosting library (Friedman 2001;
Chen and Guestrin 2016; Ke et al. 2017) and, on the out-of-bag error, by forests (Hastie,
Tibshirani and Friedman 2009, §15.3.1).

The estimators' own parameters (``early_stopping="oob"`` with ``n_iter_no_change`` and
``tol``; gradient boosting's ``n_iter_no_change`` and ``tol``; XGBoost-style
``early_stopping_rounds``) are this callback, built inside ``fit``. They came from three
libraries with three definitions of "no longer improving", and a changed definition would
change the models fitted from the same seeds, so the callback knows all three (``rule``):

``"best"`` (XGBoost, LightGBM)
    A value improves when it beats the best so far by more than ``min_delta``; stop once
    ``patience`` iterations have passed since the last improvement.
``"window"`` (the forests' out-of-bag rule)
    Stop once the best of the last ``patience`` values does not beat the best of all earlier
    values by at least ``min_delta``; NaN values (no out-of-bag row yet) are skipped.
``"last"`` (scikit-learn's gradient boosting)
    Stop at the first value that does not beat at least one of the ``patience`` values before
    it by more than ``min_delta``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from engine.callbacks import ProgressEvent, StopTraining

__all__ = ["RULES", "EarlyStopping"]

RULES = ("best", "window", "last")


@dataclass(eq=False)
class EarlyStopping:
    """End training when ``metric`` stops improving; optionally keep its best iteration.

    Parameters
    ----------
    metric : str
        A key of the events' metrics, e.g. ``engine.callbacks.OOB_ERROR``,
        ``VALIDATION_LOSS`` or ``eval_set_metric(0, "logloss")``.
    patience : int
        Iterations without improvement before stopping (``n_iter_no_change``,
        ``early_stopping_rounds``).
    min_delta : float
        An improvement must exceed this (``tol``); see ``rule`` for the exact comparison.
    maximize : bool
        True when higher is better (a log-likelihood); the metric keys the engine emits
        are lower-is-better except ``LOG_LIKELIHOOD``.
    rule : {"best", "window", "last"}
        What "no longer improving" means (module docstring).
    keep_best : bool
        When training ends — by this callback or at the last planned iteration — ask the
        estimator to keep only the iterations up to the best one (XGBoost's
        ``best_iteration``). Boosting drops the later stages; forests and bagging drop the
        later members and recount their out-of-bag figures.

    Attributes
    ----------
    history : list of float
        The metric at every iteration of the current fit.
    best_iteration : int or None
        0-based index of the best value: the last one that beat every earlier best by more
        than ``min_delta``.
    best_score : float or None
        The metric there.
    stopped_at : int or None
        Iterations done when this callback ended training; None when it did not.

    A callback instance may serve several fits: its state starts over when an event's
    ``done`` does not exceed the previous one's.
    """

    metric: str
    patience: int = 10
    min_delta: float = 0.0
    maximize: bool = False
    rule: str = "best"
    keep_best: bool = False
    history: list[float] = field(init=False, repr=False)
    best_iteration: int | None = field(init=False, repr=False)
    best_score: float | None = field(init=False, repr=False)
    stopped_at: int | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.patience, bool) or not isinstance(self.patience, int | np.integer):
            raise TypeError(f"patience must be an int, got {self.patience!r}.")
        if self.patience < 1:
            raise ValueError(f"patience must be at least 1, got {self.patience}.")
        if not math.isfinite(self.min_delta) or self.min_delta < 0:
            raise ValueError(f"min_delta must be finite and non-negative, got {self.min_delta}.")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}.")
        self._restart()

    def _restart(self) -> None:
        self.history = []
        self.best_iteration = None
        self.best_score = None
        self.stopped_at = None
        self._done = 0

    def __call__(self, event: ProgressEvent) -> StopTraining | None:
        if event.done <= self._done:
            self._restart()  # a new fit
        self._done = event.done
        if self.metric not in event.metrics:
            reported = ", ".join(sorted(event.metrics)) or "no metrics"
            raise ValueError(
                f"EarlyStopping watches '{self.metric}', which {event.estimator} does not "
                f"report here (it reports {reported})."
            )
        value = float(event.metrics[self.metric])
        self.history.append(value)
        self._track_best(value)
        if self._no_longer_improving():
            self.stopped_at = event.done
            return StopTraining(self._keep())
        keep = self._keep()
        if event.done >= event.total and keep is not None and keep < event.done:
            return StopTraining(keep)  # the last planned iteration: keep the best one
        return None

    def _signed(self, value: float) -> float:
        """The value with lower meaning better."""
        return -value if self.maximize else value

    def _track_best(self, value: float) -> None:
        # As XGBoost's and LightGBM's callbacks: the best moves only on an improvement of
        # more than min_delta, and a first value of NaN is never beaten.
        signed = self._signed(value)
        if self.best_score is None or signed < self._signed(self.best_score) - self.min_delta:
            self.best_score, self.best_iteration = value, len(self.history) - 1

    def _no_longer_improving(self) -> bool:
        patience, delta = self.patience, self.min_delta
        if self.rule == "best":
            assert self.best_iteration is not None
            return len(self.history) - 1 - self.best_iteration >= patience
        history = np.asarray(self.history, dtype=np.float64)
        if self.maximize:
            history = -history
        if self.rule == "window":
            if history.size <= patience:
                return False
            earlier, recent = history[:-patience], history[-patience:]
            if np.isnan(earlier).all():
                return False
            return bool(np.nanmin(recent) > np.nanmin(earlier) - delta)
        # "last": the values before this one, padded with +inf to ``patience`` of them (a
        # short history never stops), as scikit-learn's ring buffer of past losses.
        previous = np.full(patience, np.inf)
        recent = history[:-1][-patience:]
        previous[: recent.size] = recent
        return not bool(np.any(history[-1] + delta < previous))

    def _keep(self) -> int | None:
        if not self.keep_best or self.best_iteration is None:
            return None
        return self.best_iteration + 1
