"""A batch prediction on the server: a stored dataset scored by a model, as a job whose
result is a new dataset."""

from __future__ import annotations

from typing import Any, TextIO

from coppice._running import ServerRun
from coppice.datasets import Dataset
from coppice.errors import CoppiceError, JobCancelledError, JobFailedError


class BatchPrediction(ServerRun):
    """A batch prediction as last seen; :meth:`wait` returns the scored dataset, and
    :meth:`cancel` stops it (a queued one at once, a running one within seconds)."""

    kind = "batch prediction"
    collection = "batch-predictions"

    def __repr__(self) -> str:
        return f"<BatchPrediction {self.id} {self.status} {self.stage!r}>"

    @property
    def model_id(self) -> str:
        return str(self.info["model_id"])

    @property
    def dataset_id(self) -> str:
        return str(self.info["dataset_id"])

    @property
    def output_dataset_id(self) -> str | None:
        return self.info.get("output_dataset_id")

    @property
    def n_rows(self) -> int:
        return int(self.info["n_rows"])

    @property
    def metrics(self) -> dict[str, Any] | None:
        """The model's metric set on the scored rows, when the dataset held its target."""
        metrics = self.info.get("metrics")
        return dict(metrics) if metrics is not None else None

    @property
    def notes(self) -> list[str]:
        """What to know about the scoring: features the dataset lacks, unseen categories."""
        return list(self.info.get("notes") or [])

    def wait(
        self,
        progress: bool = False,
        *,
        timeout: float | None = None,
        file: TextIO | None = None,
    ) -> Dataset:
        """Wait for the batch to end and return the scored dataset (``.to_pandas()``,
        ``.download(path)``).

        With ``progress``, a bar (or lines, without tqdm) on ``file`` (stderr) shows the rows
        scored. Ctrl-C asks the server to cancel, then raises ``KeyboardInterrupt``. Raises
        :class:`~coppice.errors.JobFailedError` or :class:`~coppice.errors.JobCancelledError`
        when it ends without an output, and ``TimeoutError`` when ``timeout`` seconds pass.
        """
        self._wait_until_ended(progress, timeout, file)
        return self.result()

    def result(self) -> Dataset:
        """The output dataset of a succeeded batch; the reason, raised, for one that did not."""
        if self.status == "succeeded" and self.output_dataset_id:
            return self._client.dataset(self.output_dataset_id)
        if self.status == "failed":
            error = self.info.get("error") or {}
            raise JobFailedError(
                self.id, str(error.get("code", "unknown")), str(error.get("message", ""))
            )
        if self.status == "cancelled":
            raise JobCancelledError(self.id)
        raise CoppiceError(f"batch prediction {self.id} is still {self.status}: wait() for it")
