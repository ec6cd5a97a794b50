"""The prediction log's writer: a bounded queue and one thread that writes it in batches.

A predict hands its rows over with :meth:`PredictionLog.submit`, which never blocks and never
raises: when the queue is full the rows are counted as dropped. Everything else — sampling,
binning against the model's baseline, finding unseen categories, the insert and the per-model
cap — happens on the writer thread, and a batch the database refuses is counted as failed and
logged, then forgotten. So logging adds a queue ``put`` to a predict, and a broken log costs
its rows, never an answer.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.db.session import reading, transaction
from service.db.types import utc_now
from service.monitoring import repository
from service.monitoring.aggregates import (
    HOUR,
    UNSEEN_VALUES_PER_HOUR,
    Tally,
    WindowCounts,
    hour_of,
    tally_rows,
)
from service.monitoring.baseline import categorical_bins, numeric_bins, psi

logger = logging.getLogger(__name__)

# Requests written per transaction at most; a batch is what came within LINGER_SECONDS of its
# first request, up to this.
BATCH_REQUESTS = 500
LINGER_SECONDS = 0.2
LINGER_STEP = 0.02
Cell = Callable[[int, str], Any]
# The writer refreshes a model's PSI gauges from the hourly counts (the last 24 hours) at most
# this often, after a batch that logged rows of it; a report sets them too.
GAUGE_SECONDS = 60.0
GAUGE_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One predict's rows, as handed to the log (no work done on them yet)."""

    model_id: str
    logged_at: datetime
    X: npt.NDArray[np.float64]  # (n, p) as the model saw it
    predictions: Sequence[Any] | npt.NDArray[Any]  # labels (classification) or values
    proba: npt.NDArray[np.float64] | None
    ids: Sequence[str]
    features: Sequence[str]
    categories: dict[str, list[str]]
    classes: list[str] | None
    # The cell the client sent for (row, feature), to tell an unseen category from a missing
    # one (the encoder makes both NaN); None when the request sent codes, not text.
    cell: Cell | None


@dataclass
class LogCounts:
    """What the log did, by model (logged) or in all (dropped, failed), since start."""

    logged: Counter[str]
    dropped: int = 0
    failed: int = 0
    trimmed: int = 0


class PredictionLog:
    """Owned by the app's lifespan: :meth:`start`, :meth:`submit` from predicts, :meth:`stop`."""

    def __init__(
        self,
        engine: Engine,
        *,
        rate: float,
        max_rows: int,
        queue_size: int,
        seed: int | None = None,
        gauge_seconds: float = GAUGE_SECONDS,
        linger: float = LINGER_SECONDS,
    ) -> None:
        self.engine = engine
        self.rate = rate
        self.max_rows = max_rows
        self.counts = LogCounts(Counter())
        # The latest report's PSI by model (and feature), for the gauges.
        self.feature_psi: dict[str, dict[str, float]] = {}
        self.prediction_psi: dict[str, float] = {}
        self._queue: queue.Queue[LoggedRequest | None] = queue.Queue(maxsize=queue_size)
        self._random = np.random.default_rng(seed)
        self._baselines: dict[str, dict[str, Any] | None] = {}
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._busy = 0
        self.linger = linger
        # Rows each model's log holds, as this process counted them (for the cap).
        self._held: dict[str, int] = {}
        self._flush = threading.Event()
        # When each model's gauges were last set (monotonic seconds).
        self._refreshed: dict[str, float] = {}
        self.gauge_seconds = gauge_seconds

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    # --- the request side -----------------------------------------------------------------

    def submit(self, request: LoggedRequest) -> None:
        """Queue ``request``'s rows; never blocks, never raises (a full queue drops them)."""
        try:
            with self._idle:
                self._busy += 1
            self._queue.put_nowait(request)
        except queue.Full:
            self._done(1)
            self.counts.dropped += len(request.ids)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="prediction-log", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (up to ``timeout``), then end the thread."""
        if self._thread is None:
            return
        self.drain(timeout)
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=1.0)
        self._thread.join(timeout)
        self._thread = None

    def drain(self, timeout: float) -> bool:
        """Wait until every submitted request is written (or counted failed); False on time-out."""
        deadline = time.monotonic() + timeout
        self._flush.set()
        try:
            with self._idle:
                while self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._idle.wait(left)
            return True
        finally:
            self._flush.clear()

    def set_gauges(self, model_id: str, report: dict[str, Any]) -> None:
        """Keep a report's PSI figures for the gauges."""
        self.feature_psi[model_id] = {
            f["name"]: f["psi"] for f in report["features"] if f["psi"] is not None
        }
        value = (report.get("prediction") or {}).get("psi")
        if value is not None:
            self.prediction_psi[model_id] = value
        self._refreshed[model_id] = time.monotonic()

    def forget(self, model_id: str) -> None:
        """Drop what is remembered of a model (its baseline; a deleted model's gauges)."""
        self._baselines.pop(model_id, None)
        self._held.pop(model_id, None)
        self.feature_psi.pop(model_id, None)
        self.prediction_psi.pop(model_id, None)

    # --- the writer thread ----------------------------------------------------------------

    def _done(self, n: int) -> None:
        with self._idle:
            self._busy -= n
            if not self._busy:
                self._idle.notify_all()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            # Linger for more: one-row predicts then share a batch's commit and its binning,
            # most of the writer's cost, and the writer takes the GIL from the requests less
            # often (Kafka's producers batch with linger.ms for the same reason). A drain
            # (feedback, stop) cuts it short.
            deadline = time.monotonic() + self.linger
            while len(batch) < BATCH_REQUESTS:
                left = deadline - time.monotonic()
                hurry = left <= 0 or self._flush.is_set()
                try:
                    if hurry:
                        more = self._queue.get_nowait()
                    else:
                        more = self._queue.get(timeout=min(left, LINGER_STEP))
                except queue.Empty:
                    if hurry:
                        break
                    continue
                if more is None:
                    self._write(batch)
                    return
                batch.append(more)
            self._write(batch)

    def _write(self, batch: list[LoggedRequest]) -> None:
        n_rows = 0
        try:
            rows: list[dict[str, Any]] = []
            tally = Tally()
            by_model: dict[str, list[LoggedRequest]] = {}
            for request in batch:
                by_model.setdefault(request.model_id, []).append(request)
            for requests in by_model.values():
                rows.extend(self._rows(requests, tally))
            n_rows = len(rows)
            written = Counter(row["model_id"] for row in rows)
            held: dict[str, int] = {}
            with transaction(self.engine) as session:
                # The rows and their hourly counts commit together, or neither does.
                repository.insert_rows(session, rows)
                _add(session, tally)
                for model_id in sorted({request.model_id for request in batch}):
                    held[model_id] = self._trim(session, model_id, written[model_id])
            self._held.update(held)  # only once committed
            for row in rows:
                self.counts.logged[row["model_id"]] += 1
        except Exception:  # a failing log is counted, never raised: predicts go on
            self.counts.failed += n_rows or sum(len(request.ids) for request in batch)
            logger.warning(
                "prediction log: a batch of %d requests was not written", len(batch), exc_info=True
            )
        else:
            try:
                self._refresh_gauges({request.model_id for request in batch})
            except Exception:  # the gauges keep their last figures; the next batch tries again
                logger.warning("prediction log: the PSI gauges were not refreshed", exc_info=True)
        finally:
            self._done(len(batch))

    def _refresh_gauges(self, model_ids: set[str]) -> None:
        """Set the PSI gauges of ``model_ids`` from the last day's counts, each at most every
        ``gauge_seconds``: alerts then need no scheduled report (docs/monitoring.md)."""
        now = time.monotonic()
        for model_id in sorted(model_ids):
            if now - self._refreshed.get(model_id, -math.inf) < self.gauge_seconds:
                continue
            self._refreshed[model_id] = now
            baseline = self._baseline(model_id)
            if baseline is None:
                continue
            until = hour_of(utc_now()) + HOUR
            since = until - GAUGE_WINDOW - HOUR
            with reading(self.engine) as session:
                totals = repository.window_totals(session, model_id, since, until)
            counts = WindowCounts.from_sums(totals, (), (), len(baseline["features"]))
            entries = [*baseline["features"], baseline["prediction"]]
            values = [psi(e["proportions"], counts.column(j, len(e["proportions"])))
                      for j, e in enumerate(entries)]  # fmt: skip
            self.feature_psi[model_id] = {
                e["name"]: v
                for e, v in zip(baseline["features"], values[:-1], strict=True)
                if v is not None
            }
            if values[-1] is not None:
                self.prediction_psi[model_id] = values[-1]

    def _trim(self, session: Session, model_id: str, written: int) -> int:
        """Apply the per-model cap, taking the deleted rows' counts away with them; returns
        how many rows the model's log holds as far as this process knows.

        Finding the cut walks the model's log (an ``OFFSET`` of the cap: 50 ms a batch at a
        million rows), so it runs only once this process has counted the cap plus 1% of it:
        the rows it wrote on top of what the log held when it last looked."""
        held = self._held.get(model_id)
        if held is not None:
            held += written
            if held <= self.max_rows + self.max_rows // 100:
                return held
        gone = repository.trim(session, model_id, self.max_rows)
        held = repository.count_rows(session, model_id) if held is None else self.max_rows
        if not gone:
            return held
        self.counts.trimmed += len(gone)
        baseline = self._baseline(model_id, session)
        width = None if baseline is None else len(baseline["features"]) + 1
        features = repository.model_features(session, model_id)
        tally = tally_rows(model_id, gone, features, width)
        repository.take_counts(session, list(tally.count_rows()))
        for key, values in tally.unseen_rows():
            repository.take_unseen(session, key, values)
        return held

    def _baseline(self, model_id: str, session: Session | None = None) -> dict[str, Any] | None:
        if model_id not in self._baselines:
            if session is not None:
                _, self._baselines[model_id] = repository.model_baseline(session, model_id)
            else:
                with reading(self.engine) as fresh:
                    _, self._baselines[model_id] = repository.model_baseline(fresh, model_id)
        return self._baselines[model_id]

    def _rows(self, requests: list[LoggedRequest], tally: Tally) -> list[dict[str, Any]]:
        """The log rows of one model's ``requests`` (sampled), their counts added to ``tally``.

        The requests' rows are stacked and binned at once: under load a batch holds many
        one-row requests, and binning each alone cost a NumPy call per feature per request."""
        parts = []
        for request in requests:
            n = len(request.ids)
            if self.rate >= 1:
                chosen = np.arange(n)
            else:
                chosen = np.flatnonzero(self._random.random(n) < self.rate)
            if chosen.size:
                parts.append((request, chosen))
        if not parts:
            return []
        first = parts[0][0]
        X = np.concatenate([request.X[chosen] for request, chosen in parts])
        predictions = np.concatenate(
            [_coded(request.predictions, request.classes)[chosen] for request, chosen in parts]
        )
        unseen: dict[int, dict[str, str]] = {}
        offset = 0
        for request, chosen in parts:
            for k, values in self._unseen(request, request.X[chosen], chosen).items():
                unseen[offset + k] = values
            offset += chosen.size
        bins = _bins(X, unseen, predictions, self._baseline(first.model_id), first)
        position = {name: j for j, name in enumerate(first.features)}
        features = X.astype(np.float32)
        rows: list[dict[str, Any]] = []
        offset = 0
        for request, chosen in parts:
            end = offset + chosen.size
            found = [
                (position[name], text)
                for k in range(offset, end)
                for name, text in unseen.get(k, {}).items()
            ]
            tally.add(
                request.model_id,
                hour_of(request.logged_at),
                int(chosen.size),
                None if bins is None else bins[offset:end],
                found,
            )
            proba = None if request.proba is None else request.proba[chosen].astype(np.float32)
            for k, i in enumerate(chosen.tolist()):
                value = float(predictions[offset + k])
                rows.append(
                    {
                        "model_id": request.model_id,
                        "row_id": request.ids[i],
                        "logged_at": request.logged_at,
                        "features": features[offset + k].tobytes(),
                        "bins": None if bins is None else bins[offset + k].tobytes(),
                        "unseen": unseen.get(offset + k),
                        "prediction": value if math.isfinite(value) else None,
                        "proba": None if proba is None else proba[k].tobytes(),
                        "actual": None,
                    }
                )
            offset = end
        return rows

    @staticmethod
    def _unseen(
        request: LoggedRequest, X: npt.NDArray[np.float64], chosen: npt.NDArray[np.intp]
    ) -> dict[int, dict[str, str]]:
        """By chosen row: ``{feature: text}`` of categorical cells the encoder made missing
        although the client sent a value."""
        found: dict[int, dict[str, str]] = {}
        if request.cell is None or not request.categories:
            return found
        for j, name in enumerate(request.features):
            if name not in request.categories:
                continue
            for k in np.flatnonzero(np.isnan(X[:, j])).tolist():
                sent = request.cell(int(chosen[k]), name)
                if sent is not None:
                    found.setdefault(k, {})[name] = str(sent)[:200]
        return found


def _add(session: Session, tally: Tally) -> None:
    repository.add_counts(session, list(tally.count_rows()))
    for key, values in tally.unseen_rows():
        repository.add_unseen(session, key, values, UNSEEN_VALUES_PER_HOUR)


def _coded(
    predictions: Sequence[Any] | npt.NDArray[Any], classes: list[str] | None
) -> npt.NDArray[np.float64]:
    """Predictions as floats: values, or the index of the label in ``classes``."""
    if classes is None:
        return np.asarray(predictions, dtype=np.float64)
    index = {label: float(i) for i, label in enumerate(classes)}
    return np.array([index.get(str(label), math.nan) for label in predictions], dtype=np.float64)


def _bins(
    X: npt.NDArray[np.float64],
    unseen: dict[int, dict[str, str]],
    predictions: npt.NDArray[np.float64],
    baseline: dict[str, Any] | None,
    request: LoggedRequest,
) -> npt.NDArray[np.uint16] | None:
    """Per row, the baseline bin of each feature and then of the prediction (uint16)."""
    if baseline is None:
        return None
    entries = baseline["features"]
    if [entry["name"] for entry in entries] != list(request.features):
        return None
    out = np.empty((X.shape[0], len(entries) + 1), dtype=np.uint16)
    for j, entry in enumerate(entries):
        if entry["kind"] == "categorical":
            n_categories = len(entry["proportions"]) - 2
            flags = np.zeros(X.shape[0], dtype=np.bool_)
            for k, values in unseen.items():
                if entry["name"] in values:
                    flags[k] = True
            out[:, j] = categorical_bins(X[:, j], n_categories, flags)
        else:
            out[:, j] = numeric_bins(X[:, j], entry["edges"])
    prediction = baseline["prediction"]
    if prediction["kind"] == "categorical":
        n_classes = len(prediction["proportions"]) - 2
        out[:, -1] = categorical_bins(predictions, n_classes, np.zeros(X.shape[0], dtype=np.bool_))
    else:
        out[:, -1] = numeric_bins(predictions, prediction["edges"])
    return out
