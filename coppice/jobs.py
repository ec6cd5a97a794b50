"""A training job on the server: its state, waiting for its model, cancelling it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from coppice._progress import Progress
from coppice._waiting import Deadline, wait_on_server, watching
from coppice.errors import CoppiceError, JobCancelledError, JobFailedError

if TYPE_CHECKING:
    from coppice.client import Client
    from coppice.models import Model

ENDED = frozenset({"succeeded", "failed", "cancelled"})


class Job:
    """A job as last seen; :meth:`refresh` and :meth:`wait` look again."""

    def __init__(self, client: Client, info: dict[str, Any]) -> None:
        self._client = client
        self.info = info

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.status} {self.stage!r}>"

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @property
    def status(self) -> str:
        return str(self.info["status"])

    @property
    def progress(self) -> float:
        return float(self.info.get("progress") or 0.0)

    @property
    def stage(self) -> str:
        return str(self.info.get("stage") or "")

    @property
    def model_id(self) -> str | None:
        return self.info.get("model_id")

    @property
    def done(self) -> bool:
        return self.status in ENDED

    def refresh(self, wait: float = 0.0) -> Job:
        """Read the job again; with ``wait``, once it has ended or ``wait`` s (≤ 30) passed."""
        params = {"wait": wait} if wait > 0 else None
        self.info = self._client._transport.json("GET", f"/v1/jobs/{self.id}", params=params)
        return self

    def cancel(self) -> Job:
        """Ask the server to stop the job: a queued one ends at once, a running one soon.

        Raises :class:`~coppice.errors.ConflictError` if it has already ended.
        """
        # Asking twice is harmless (a second 202), so the request may be retried.
        path = f"/v1/jobs/{self.id}/cancel"
        self.info = self._client._transport.json("POST", path, idempotent=True)
        return self

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
        with watching("job", self.id, self.cancel, progress=progress, file=file) as display:
            self._wait_until_ended(display, Deadline(timeout))
        return self.result()

    def _wait_until_ended(self, display: Progress | None, deadline: Deadline) -> None:
        wait_on_server(
            lambda step: self.refresh(wait=step),
            lambda: self.done,
            None if display is None else lambda: display.show(self.info),
            deadline,
            lambda: f"job {self.id} is still {self.status} ({self.stage})",
        )

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
