"""Time rules of the queue: lease expiry and retry back-off."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# A crashed job waits at most this long before it can be claimed again, however many retries.
MAX_RETRY_DELAY = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class LeasePolicy:
    """How long a claim lasts, how often it is renewed, and how retries are spaced.

    ``heartbeat`` is shorter than ``lease``, so a live worker renews every lease well before it
    lapses; a worker that dies stops renewing, and ``lease`` later any worker may take the job
    back. The retry delay is ``backoff * 2 ** (attempts - 1)``, at most ``MAX_RETRY_DELAY``.
    """

    lease: timedelta
    heartbeat: timedelta
    backoff: timedelta

    def expires_at(self, now: datetime) -> datetime:
        return now + self.lease

    def retry_at(self, now: datetime, attempts: int) -> datetime:
        """When a job that has run ``attempts`` times may be claimed again."""
        delay = self.backoff * (1 << min(max(attempts - 1, 0), 16))
        return now + min(delay, MAX_RETRY_DELAY)
