"""The prediction log's writer: a bounded queue and one thread that writes it in batches.

A predict hands its rows over with :meth:`PredictionLog.submit`, which never blocks and never
raises: when the queue is full the rows are counted as dropped. Everything else — sampling,
binning against the model's baseline, finding unseen categories, the insert and the per-model
cap — happens on the writer thread, and a batch the database refuses is counted as failed and
logged, then forgotten. So logging adds a ``deque.append`` to a predict, and a broken log costs
its rows, never an answer.

The writer shares the API process's GIL with the requests, so what it costs a busy server is
its CPU time and how often it takes the GIL (issue 26 measured a fifth of the process at 1,500
one-row requests a second). Hence: the queue is a ``deque`` the writer empties every
``linger`` seconds, so a request never wakes it (a ``queue.Queue`` wakes a waiting consumer
on every ``put``: a GIL hand-over per request); a batch is counted per hour in one NumPy pass,
not per request; and rows go to the database as tuples through the driver's ``executemany``
(``repository.insert_rows``), without SQLAlchemy's per-row dict and bind processing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import Counter, deque
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

# Requests written per transaction at most; a batch is what came in the LINGER_SECONDS since
# the writer last looked, up to this. Half a second: a batch's counts upsert and commit cost
# about the same whatever its size, so at 2,000 requests a second longer batches are cheaper.
BATCH_REQUESTS = 2000
LINGER_SECONDS = 0.5
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
        self._binders = repository.row_binders(engine.dialect)
        self.rate = rate
        self.max_rows = max_rows
        self.counts = LogCounts(Counter())
        # The latest report's PSI by model (and feature), for the gauges.
        self.feature_psi: dict[str, dict[str, float]] = {}
        self.prediction_psi: dict[str, float] = {}
        # Requests waiting for the writer. A deque, not a queue.Queue: appending takes no lock
        # and wakes nobody; the writer looks every ``linger`` seconds (or when woken by a
        # drain or stop).
        self._pending: deque[LoggedRequest] = deque()
        self.queue_size = queue_size
        self._random = np.random.default_rng(seed)
        self._baselines: dict[str, dict[str, Any] | None] = {}
        self._thread: threading.Thread | None = None
        # Guards ``_writing``; notified when the writer has nothing left in hand or pending.
        self._idle = threading.Condition()
        self._writing = False
        self._stopping = False
        self.linger = linger
        # Rows each model's log holds, as this process counted them (for the cap).
        self._held: dict[str, int] = {}
        self._wake = threading.Event()
        # When each model's gauges were last set (monotonic seconds).
        self._refreshed: dict[str, float] = {}
        self.gauge_seconds = gauge_seconds

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    # --- the request side -----------------------------------------------------------------

    def submit(self, request: LoggedRequest) -> None:
        """Queue ``request``'s rows; never blocks, never raises (a full queue drops them).

        ``len`` then ``append`` is not atomic, so concurrent submits may pass the bound by a
        request or two: a bound on memory, not an exact count."""
        if len(self._pending) >= self.queue_size:
            self.counts.dropped += len(request.ids)
            return
        self._pending.append(request)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="prediction-log", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued (up to ``timeout``), then end the thread."""
        if self._thread is None:
            return
        self.drain(timeout)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        self._thread = None

    def drain(self, timeout: float) -> bool:
        """Wait until every submitted request is written (or counted failed); False on time-out."""
        deadline = time.monotonic() + timeout
        self._wake.set()
        try:
            with self._idle:
                while self._pending or self._writing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    # Short waits: a request submitted after the writer's last look is only
                    # seen at its next one, which the set ``_wake`` makes immediate.
                    self._idle.wait(min(left, LINGER_STEP))
            return True
        finally:
            self._wake.clear()

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

    def _run(self) -> None:
        while not self._stopping:
            # Linger: one-row predicts then share a batch's commit and its binning, most of the
            # writer's cost, and the writer takes the GIL from the requests a few times a
            # second, not once a request (Kafka's producers batch with linger.ms for the same
            # reason). A drain (feedback, stop) wakes it at once.
            self._wake.wait(self.linger)
            self._write_pending()
        self._write_pending()

    def _write_pending(self) -> None:
        """Write everything pending, ``BATCH_REQUESTS`` requests a transaction."""
        with self._idle:
            self._writing = True
        try:
            while self._pending:
                batch: list[LoggedRequest] = []
                with contextlib.suppress(IndexError):  # popleft is atomic; the deque only grows
                    while len(batch) < BATCH_REQUESTS:
                        batch.append(self._pending.popleft())
                self._write(batch)
        finally:
            with self._idle:
                self._writing = False
                self._idle.notify_all()

    def _write(self, batch: list[LoggedRequest]) -> None:
        n_rows = 0
        try:
            rows: list[tuple[Any, ...]] = []
            tally = Tally()
            by_model: dict[str, list[LoggedRequest]] = {}
            for request in batch:
                by_model.setdefault(request.model_id, []).append(request)
            written: dict[str, int] = {}
            for model_id, requests in by_model.items():
                made = self._rows(requests, tally, self._binders)
                written[model_id] = len(made)
                rows.extend(made)
            n_rows = len(rows)
            held: dict[str, int] = {}
            with transaction(self.engine) as session:
                # The rows and their hourly counts commit together, or neither does.
                repository.insert_rows(session, rows)
                _add(session, tally)
                for model_id in sorted(by_model):
                    held[model_id] = self._trim(session, model_id, written[model_id])
            self._held.update(held)  # only once committed
            for model_id, count in written.items():
                if count:
                    self.counts.logged[model_id] += count
        except Exception:  # a failing log is counted, never raised: predicts go on
            self.counts.failed += n_rows or sum(len(request.ids) for request in batch)
            logger.warning(
                "prediction log: a batch of %d requests was not written", len(batch), exc_info=True
            )
        else:
            try:
                self._refresh_gauges(set(by_model))
            except Exception:  # the gauges keep their last figures; the next batch tries again
                logger.warning("prediction log: the PSI gauges were not refreshed", exc_info=True)

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

    def _rows(
        self, requests: list[LoggedRequest], tally: Tally, binders: repository.RowBinders
    ) -> list[tuple[Any, ...]]:
        """The log rows of one model's ``requests`` (sampled), as ``repository.insert_rows``
        takes them, their counts added to ``tally``.

        The requests' rows are stacked, binned and counted at once (per hour): under load a
        batch holds hundreds of one-row requests, and a NumPy call per request and feature
        was most of the writer's time. What is left per row is slicing bytes into a tuple."""
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
        predictions = _coded(
            np.concatenate([_chosen(request.predictions, chosen) for request, chosen in parts]),
            first.classes,
        )
        unseen: dict[int, dict[str, str]] = {}
        offset = 0
        for request, chosen in parts:
            for k, sent in self._unseen(request, request.X[chosen], chosen).items():
                unseen[offset + k] = sent
            offset += chosen.size
        bins = _bins(X, unseen, predictions, self._baseline(first.model_id), first)
        _tally(tally, parts, bins, unseen, {name: j for j, name in enumerate(first.features)})
        feature_bytes = X.astype(np.float32).tobytes()
        feature_width = X.shape[1] * 4
        bin_bytes = b"" if bins is None else bins.tobytes()
        bin_width = 0 if bins is None else bins.shape[1] * 2
        finite = np.isfinite(predictions)
        coded: list[float | None] = [
            v if ok else None for v, ok in zip(predictions.tolist(), finite.tolist(), strict=True)
        ]
        rows: list[tuple[Any, ...]] = []
        offset = 0
        for request, chosen in parts:
            model_id, ids, at = request.model_id, request.ids, binders.logged_at(request.logged_at)
            proba_bytes, proba_width = b"", 0
            if request.proba is not None:
                proba_bytes = request.proba[chosen].astype(np.float32).tobytes()
                proba_width = request.proba.shape[1] * 4
            for k, i in enumerate(chosen.tolist()):
                r = offset + k
                found = unseen.get(r)
                rows.append(
                    (
                        model_id,
                        ids[i],
                        at,
                        feature_bytes[r * feature_width : (r + 1) * feature_width],
                        None if bins is None else bin_bytes[r * bin_width : (r + 1) * bin_width],
                        None if found is None else binders.unseen(found),
                        coded[r],
                        None
                        if request.proba is None
                        else proba_bytes[k * proba_width : (k + 1) * proba_width],
                        None,
                    )
                )
            offset += chosen.size
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


def _chosen(
    predictions: Sequence[Any] | npt.NDArray[Any], chosen: npt.NDArray[np.intp]
) -> npt.NDArray[Any]:
    array = predictions if isinstance(predictions, np.ndarray) else np.asarray(predictions)
    return array if array.shape[0] == chosen.size else array[chosen]


def _coded(predictions: npt.NDArray[Any], classes: list[str] | None) -> npt.NDArray[np.float64]:
    """Predictions as floats: values, or the index of the label in ``classes``."""
    if classes is None:
        return np.asarray(predictions, dtype=np.float64)
    index = {label: float(i) for i, label in enumerate(classes)}
    return np.array([index.get(str(label), math.nan) for label in predictions.tolist()],
                    dtype=np.float64)  # fmt: skip


def _tally(
    tally: Tally,
    parts: list[tuple[LoggedRequest, npt.NDArray[np.intp]]],
    bins: npt.NDArray[np.uint16] | None,
    unseen: dict[int, dict[str, str]],
    position: dict[str, int],
) -> None:
    """Add the stacked rows of ``parts`` (one model's) to ``tally``, one call per hour."""
    hours: dict[datetime, list[int]] = {}
    offset = 0
    for request, chosen in parts:
        hours.setdefault(hour_of(request.logged_at), []).extend(range(offset, offset + chosen.size))
        offset += chosen.size
    model_id = parts[0][0].model_id
    for hour, rows in hours.items():
        found = [
            (position[name], text)
            for r in (rows if unseen else ())
            for name, text in unseen.get(r, {}).items()
        ]
        if bins is None:
            tally.add(model_id, hour, len(rows), None, found)
        else:
            whole = len(rows) == bins.shape[0]  # the usual batch: all of it in one hour
            tally.add(model_id, hour, len(rows), bins if whole else bins[rows], found)


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
