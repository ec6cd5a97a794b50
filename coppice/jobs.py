"""A training job on the server: its state, waiting for its model, cancelling it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from coppice._running import ServerRun
from coppice.errors import CoppiceError, JobCancelledError, JobFailedError

if TYPE_CHECKING:
    from coppice.models import Model


class Job(ServerRun):
    """A training job as last seen; :meth:`refresh` and :meth:`wait` look again, and
    :meth:`cancel` stops it (a queued job at once, a running one within seconds)."""

    kind = "job"
    collection = "jobs"

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.status} {self.stage!r}>"

    @property
    def model_id(self) -> str | None:
        return self.info.get("model_id")

    @property
    def resources(self) -> dict[str, Any] | None:
        """What the ended fit cost: ``wall_seconds``, ``cpu_seconds``, ``peak_rss_bytes`` (of
        the fit process), ``backend`` (``"local"`` or ``"dask"``) and ``dask_workers``; None
        until the fit has ended (:meth:`refresh` or :meth:`wait` first)."""
        found = self.info.get("resources")
        return dict(found) if found else None

    def wait(
        self,
        progress: bool = False,
        *,
        timeout: float | None = None,
        file: TextIO | None = None,
    ) -> Model:
        """Wait for the job to end and return its model.

        With ``progress``, a bar (or lines, without tqdm) on ``file`` (stderr) shows the
        stage. Ctrl-C asks the server to cancel the job, then raises ``KeyboardInterrupt``.
        Raises :class:`~coppice.errors.JobFailedError` or
        :class:`~coppice.errors.JobCancelledError` when the job ends without a model, and
        ``TimeoutError`` when ``timeout`` seconds pass first.
        """
        self._wait_until_ended(progress, timeout, file)
        return self.result()

    def result(self) -> Model:
        """The model of a succeeded job; the reason, raised, for one that did not succeed."""
        if self.status == "succeeded" and self.model_id:
            return self._client.model(self.model_id)
        if self.status == "failed":
            error = self.info.get("error") or {}
            raise JobFailedError(
                self.id, str(error.get("code", "unknown")), str(error.get("message", ""))
            )
        if self.status == "cancelled":
            raise JobCancelledError(self.id)
        raise CoppiceError(f"job {self.id} is still {self.status}: wait() for it first")
