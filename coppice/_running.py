"""What jobs and searches share: something the server runs until it ends, as last seen."""

from __future__ import annotations

from typing import ClassVar, Self, TextIO

from coppice._progress import Progress
from coppice._resource import Resource
from coppice._waiting import Deadline, wait_on_server, watching

ENDED = frozenset({"succeeded", "failed", "cancelled"})


class ServerRun(Resource):
    """A job or a search as last seen; :meth:`refresh` and :meth:`wait` look again."""

    #: What it is called in messages ("job").
    kind: ClassVar[str]

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @property
    def status(self) -> str:
        return str(self.info["status"])

    @property
    def done(self) -> bool:
        return self.status in ENDED

    @property
    def progress(self) -> float:
        """From 0 to 1, as the server reports it."""
        return float(self.info.get("progress") or 0.0)

    @property
    def stage(self) -> str:
        return str(self.info.get("stage") or "")

    def refresh(self, wait: float = 0.0) -> Self:
        """Read it again; with ``wait``, once it has ended or ``wait`` s (≤ 30) passed."""
        params = {"wait": wait} if wait > 0 else None
        self.info = self._get(self.path, params=params)
        return self

    def cancel(self) -> Self:
        """Ask the server to stop it: what is queued ends at once, what runs within seconds.

        Raises :class:`~coppice.errors.ConflictError` if it has already ended.
        """
        # Asking twice is harmless (a second 202), so the request may be retried.
        self.info = self._post(f"{self.path}/cancel", idempotent=True)
        return self

    def _wait_until_ended(self, progress: bool, timeout: float | None, file: TextIO | None) -> None:
        """Wait on the server (``GET ...?wait=``) with a display when ``progress``; Ctrl-C
        cancels on the server, then raises ``KeyboardInterrupt``."""
        with watching(self.kind, self.id, self.cancel, progress=progress, file=file) as display:
            wait_on_server(
                lambda step: self.refresh(wait=step),
                lambda: self.done,
                None if display is None else lambda: self._show(display),
                Deadline(timeout),
                self._still,
            )

    def _show(self, display: Progress) -> None:
        display.show({"status": self.status, "progress": self.progress, "stage": self.stage})

    def _still(self) -> str:
        return f"{self.kind} {self.id} is still {self.status} ({self.stage})"
