"""The prediction log's writer process: bins, counts and inserts the batches the API ships it.

The API process (``service.monitoring.log``) samples each request's rows, finds the unseen
categories (they need the request's body) and sends a batch of :class:`Shipped` records down a
pipe every half second. Everything else happens here, in a process of its own: binning
against the model's baseline, the hourly counts, the executemany of the rows and its commit,
the per-model cap and the PSI gauges. A thread in the API process did this before; its
Python work and, worse, its executemany (the driver gives the GIL up around every row's
``sqlite3_step`` and must win it back from the event loop each time) took a third of a busy
server's samples and a quarter of its throughput (benchmarks/README.md). A process pays its
database work with its own CPU and GIL.

:func:`serve` is the process's loop: one message in, one :class:`Outcome` back, so the API's
shipping thread knows when a batch is written (feedback and shutdown wait for that).
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import chain, repeat
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from service.db.session import create_db_engine, reading, transaction
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

# The writer refreshes a model's PSI gauges from the hourly counts (the last 24 hours) at most
# this often, after a batch that logged rows of it; a report sets them too.
GAUGE_SECONDS = 60.0
GAUGE_WINDOW = timedelta(hours=24)


class Shipped(NamedTuple):
    """Sampled rows of one model, of one request or stacked from a batch's requests in the
    order they came (a tuple of a few arrays: pickled in one piece whatever the number of
    requests, where a record per request cost 14 µs to pickle and 8 µs to read back)."""

    model_id: str
    logged_at: list[datetime]  # by request
    sizes: list[int]  # by request: its rows among those below
    X: npt.NDArray[np.float64]  # (n, p) the sampled rows as the model saw them
    predictions: npt.NDArray[Any]  # (n,) labels (classification) or values
    proba: npt.NDArray[np.float64] | None  # (n, k); rows of requests without them are NaN
    with_proba: npt.NDArray[np.bool_] | None  # (n,) which rows' requests asked for them
    ids: list[str]
    features: list[str]  # the model's
    classes: list[str] | None
    unseen: dict[int, dict[str, str]]  # by row: {feature: text the client sent}


def stack(pieces: Sequence[Shipped]) -> Shipped:
    """One model's pieces as one, rows in order."""
    if len(pieces) == 1:
        return pieces[0]
    first = pieces[0]
    unseen: dict[int, dict[str, str]] = {}
    offset = 0
    for piece in pieces:
        for k, sent in piece.unseen.items():
            unseen[offset + k] = sent
        offset += len(piece.ids)
    proba = with_proba = None
    if any(piece.proba is not None for piece in pieces):
        width = next(piece.proba.shape[1] for piece in pieces if piece.proba is not None)
        proba = np.concatenate([_proba_or_nan(piece, width) for piece in pieces])
        with_proba = np.concatenate([_with_proba(piece) for piece in pieces])
    return Shipped(
        model_id=first.model_id,
        logged_at=[at for piece in pieces for at in piece.logged_at],
        sizes=[size for piece in pieces for size in piece.sizes],
        X=np.concatenate([piece.X for piece in pieces]),
        predictions=np.concatenate([np.asarray(piece.predictions) for piece in pieces]),
        proba=proba,
        with_proba=with_proba,
        ids=[row_id for piece in pieces for row_id in piece.ids],
        features=first.features,
        classes=first.classes,
        unseen=unseen,
    )


def _proba_or_nan(piece: Shipped, width: int) -> npt.NDArray[np.float64]:
    if piece.proba is not None:
        return piece.proba
    return np.full((len(piece.ids), width), np.nan)


def _with_proba(piece: Shipped) -> npt.NDArray[np.bool_]:
    if piece.with_proba is not None:
        return piece.with_proba
    return np.full(len(piece.ids), piece.proba is not None)


class Batch(NamedTuple):
    """A message to the writer: models to forget first, then requests to write."""

    forget: list[str]
    requests: list[Shipped]


@dataclass
class Outcome:
    """What writing one batch did, sent back to the API process."""

    logged: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    trimmed: int = 0
    # Refreshed PSI gauges: by model, (feature PSI by name, prediction PSI).
    gauges: dict[str, tuple[dict[str, float], float | None]] = field(default_factory=dict)


def serve(
    inbox: Connection,
    outbox: Connection,
    database_url: str,
    max_rows: int,
    gauge_seconds: float,
    unseen_values: int = UNSEEN_VALUES_PER_HOUR,
) -> None:
    """The writer process's loop: a :class:`Batch` in, its :class:`Outcome` out, until the
    API process sends ``None`` or goes away (the pipe's end)."""
    # Ctrl-C at `coppice serve`'s terminal reaches the whole group: the API stops the writer
    # itself, after writing what is queued.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    engine = create_db_engine(database_url)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _commit_without_fsync)
    writer = BatchWriter(
        engine, max_rows=max_rows, gauge_seconds=gauge_seconds, unseen_values=unseen_values
    )
    try:
        while True:
            try:
                message = inbox.recv()
            except EOFError:
                return
            if message is None:
                return
            outbox.send(writer.write(message))
    finally:
        engine.dispose()


def _commit_without_fsync(dbapi_connection: Any, _record: Any) -> None:
    """The log's own SQLite connections commit without an fsync: ``synchronous=NORMAL``
    under WAL, as SQLite's documentation advises for WAL. The database stays consistent and
    a crash of the process loses nothing; a power cut or an OS crash can undo the last
    commits (rows and their counts together). Within what the log promises (rows are
    sampled, and dropped when it cannot keep up), and an fsync twice a second stalled the
    API's own writes to the same disk: a logging server served 1.11× the throughput with it
    off (benchmarks/README.md). The service's other connections keep SQLite's default."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


class BatchWriter:
    """Writes batches of one API process's requests: rows, hourly counts, the cap, gauges."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_rows: int,
        gauge_seconds: float,
        unseen_values: int = UNSEEN_VALUES_PER_HOUR,
    ) -> None:
        self.engine = engine
        self.unseen_values = unseen_values
        self.max_rows = max_rows
        self.gauge_seconds = gauge_seconds
        self._binders = repository.row_binders(engine.dialect)
        self._baselines: dict[str, dict[str, Any] | None] = {}
        # Rows each model's log holds, as this process counted them (for the cap).
        self._held: dict[str, int] = {}
        # When each model's gauges were last set (monotonic seconds).
        self._refreshed: dict[str, float] = {}

    def write(self, batch: Batch) -> Outcome:
        for model_id in batch.forget:
            self._baselines.pop(model_id, None)
            self._held.pop(model_id, None)
            self._refreshed.pop(model_id, None)
        outcome = Outcome()
        if not batch.requests:
            return outcome
        n_rows = 0
        try:
            rows: list[tuple[Any, ...]] = []
            tally = Tally()
            by_model: dict[str, list[Shipped]] = {}
            for request in batch.requests:
                by_model.setdefault(request.model_id, []).append(request)
            written: dict[str, int] = {}
            for model_id, requests in by_model.items():
                made = self._rows(requests, tally)
                written[model_id] = len(made)
                rows.extend(made)
            n_rows = len(rows)
            held: dict[str, int] = {}
            with transaction(self.engine) as session:
                # The rows and their hourly counts commit together, or neither does.
                repository.insert_rows(session, rows)
                _add(session, tally, self.unseen_values)
                for model_id in sorted(by_model):
                    held[model_id] = self._trim(session, model_id, written[model_id], outcome)
            self._held.update(held)  # only once committed
            for model_id, count in written.items():
                if count:
                    outcome.logged[model_id] += count
        except Exception:  # a failing log is counted, never raised: predicts go on
            outcome.failed += n_rows or sum(len(request.ids) for request in batch.requests)
            outcome.trimmed = 0
            logger.warning(
                "prediction log: a batch of %d requests was not written",
                len(batch.requests),
                exc_info=True,
            )
        else:
            try:
                self._refresh_gauges(set(by_model), outcome)
            except Exception:  # the gauges keep their last figures; the next batch tries again
                logger.warning("prediction log: the PSI gauges were not refreshed", exc_info=True)
        return outcome

    def _refresh_gauges(self, model_ids: set[str], outcome: Outcome) -> None:
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
            outcome.gauges[model_id] = (
                {
                    e["name"]: v
                    for e, v in zip(baseline["features"], values[:-1], strict=True)
                    if v is not None
                },
                values[-1],
            )

    def _trim(self, session: Session, model_id: str, written: int, outcome: Outcome) -> int:
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
        outcome.trimmed += len(gone)
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

    def _rows(self, requests: list[Shipped], tally: Tally) -> list[tuple[Any, ...]]:
        """The log rows of one model's ``requests``, as ``repository.insert_rows`` takes them,
        their counts added to ``tally``.

        The rows are binned and counted at once (per hour), and each row's bytes are cut by
        NumPy (``_row_bytes``): under load a batch holds thousands of one-row requests, and
        Python work per request or per cell was most of the writer's time."""
        requests = [request for request in requests if request.ids]
        if not requests:
            return []
        shipped = stack(requests)
        X, n = shipped.X, len(shipped.ids)
        predictions = _coded(shipped.predictions, shipped.classes)
        unseen = shipped.unseen
        bins = _bins(X, unseen, predictions, self._baseline(shipped.model_id), shipped.features)
        _tally(tally, shipped, bins, {name: j for j, name in enumerate(shipped.features)})
        binders = self._binders
        at = [binders.logged_at(moment) for moment in shipped.logged_at]
        if len(at) != n:
            at = list(chain.from_iterable(map(repeat, at, shipped.sizes)))
        found: list[Any] = [None] * n
        for k, sent in unseen.items():
            found[k] = binders.unseen(sent)
        proba: list[bytes | None] = [None] * n
        if shipped.proba is not None:
            proba = list[bytes | None](_row_bytes(shipped.proba.astype(np.float32)))
            if shipped.with_proba is not None and not shipped.with_proba.all():
                proba = [row if asked else None
                         for row, asked in zip(proba, shipped.with_proba.tolist(), strict=True)]  # fmt: skip
        finite = np.isfinite(predictions)
        coded: list[float | None] = [
            v if ok else None for v, ok in zip(predictions.tolist(), finite.tolist(), strict=True)
        ]
        return list(
            zip(
                repeat(shipped.model_id, n),
                shipped.ids,
                at,
                _row_bytes(X.astype(np.float32)),
                [None] * n if bins is None else _row_bytes(bins),
                found,
                coded,
                proba,
                strict=False,  # the repeat is endless; the lists are n long
            )
        )


def _row_bytes(values: npt.NDArray[Any]) -> list[bytes]:
    """Each row of a 2-D array as its bytes, cut in one NumPy call (a void scalar per row)."""
    values = np.ascontiguousarray(values)
    rows = values.view(np.dtype((np.void, values.shape[1] * values.itemsize))).ravel()
    return cast(list[bytes], rows.tolist())


def _add(session: Session, tally: Tally, unseen_values: int) -> None:
    repository.add_counts(session, list(tally.count_rows()))
    for key, values in tally.unseen_rows():
        repository.add_unseen(session, key, values, unseen_values)


def _coded(predictions: npt.NDArray[Any], classes: list[str] | None) -> npt.NDArray[np.float64]:
    """Predictions as floats: values, or the index of the label in ``classes``."""
    if classes is None:
        return np.asarray(predictions, dtype=np.float64)
    index = {label: float(i) for i, label in enumerate(classes)}
    return np.array([index.get(str(label), math.nan) for label in predictions.tolist()],
                    dtype=np.float64)  # fmt: skip


def _tally(
    tally: Tally,
    shipped: Shipped,
    bins: npt.NDArray[np.uint16] | None,
    position: dict[str, int],
) -> None:
    """Add ``shipped``'s rows to ``tally``, one call per hour (a batch seldom spans two)."""
    model_id, unseen = shipped.model_id, shipped.unseen
    first = hour_of(min(shipped.logged_at))
    rows_by_hour: dict[datetime, npt.NDArray[np.intp] | None] = {first: None}
    if hour_of(max(shipped.logged_at)) != first:
        hours = [hour_of(moment) for moment in shipped.logged_at]
        of_row = np.repeat(np.arange(len(hours)), shipped.sizes)
        rows_by_hour = {}
        for hour in set(hours):
            wanted = [k for k, h in enumerate(hours) if h == hour]
            rows_by_hour[hour] = np.flatnonzero(np.isin(of_row, wanted))
    for hour, rows in rows_by_hour.items():
        chosen = range(len(shipped.ids)) if rows is None else rows.tolist()
        found = [
            (position[name], text)
            for r in (chosen if unseen else ())
            for name, text in unseen.get(r, {}).items()
        ]
        n_rows = len(shipped.ids) if rows is None else rows.size
        if bins is None:
            tally.add(model_id, hour, n_rows, None, found)
        else:
            tally.add(model_id, hour, n_rows, bins if rows is None else bins[rows], found)


def _bins(
    X: npt.NDArray[np.float64],
    unseen: dict[int, dict[str, str]],
    predictions: npt.NDArray[np.float64],
    baseline: dict[str, Any] | None,
    features: list[str],
) -> npt.NDArray[np.uint16] | None:
    """Per row, the baseline bin of each feature and then of the prediction (uint16)."""
    if baseline is None:
        return None
    entries = baseline["features"]
    if [entry["name"] for entry in entries] != list(features):
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
