"""Throttled progress: keep the newest report, pass one on at most every ``interval`` seconds.

Training may report progress thousands of times a second (one report per small tree); the fit
process forwards a few a second to the worker, and the worker writes at most one a second to
the job row. Both ends use this class with their own interval.
"""

from __future__ import annotations

import math


class ProgressThrottle:
    """Holds the newest ``(fraction, stage)`` until it is due.

    Times are ``time.monotonic()`` seconds passed in by the caller, which keeps the class
    deterministic under test.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._pending: tuple[float, str] | None = None
        self._last_taken = -math.inf

    def offer(self, fraction: float, stage: str, now: float) -> bool:
        """Record a report; return whether one is due (then call :meth:`take`)."""
        fraction = float(fraction)
        # The job row's CHECK constraint holds progress to [0, 1]; NaN would break it too.
        fraction = 0.0 if math.isnan(fraction) else min(max(fraction, 0.0), 1.0)
        self._pending = (fraction, str(stage))
        return self.due(now)

    def due(self, now: float) -> bool:
        """Whether a pending report may be passed on now."""
        if self._pending is None:
            return False
        return self._pending[0] >= 1.0 or now - self._last_taken >= self.interval

    def take(self, now: float | None = None) -> tuple[float, str]:
        """The pending report, which is then no longer pending."""
        if self._pending is None:
            raise LookupError("no progress report is pending")
        pending, self._pending = self._pending, None
        self._last_taken = -math.inf if now is None else now
        return pending
