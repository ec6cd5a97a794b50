"""The prediction log's API side: a bounded queue, and a thread that ships it to the writer.

A predict hands its rows over with :meth:`PredictionLog.submit`, which never blocks and never
raises: when the queue is full the rows are counted as dropped. So logging adds a
``deque.append`` to a predict, and a broken log costs its rows, never an answer.

Every ``linger`` seconds one thread of the API process takes what is queued, samples it, finds
the categorical values training never saw (they need the request's body, which stays here),
stacks each model's rows into one set of arrays and sends the batch down a pipe to the writer
process (``service.monitoring.writer``), which bins,
counts and inserts it and answers with what it did. The thread then waits for that answer with
the GIL released, so the API process pays a few microseconds of Python per request and
nothing per logged row. The writer process is started by the first batch (an app that never
logs never starts it) and again after a batch if it died, whose rows are counted as failed.

Why not a thread that writes: the API process has one GIL for its event loop and its writer.
A writer thread's binning, counting and, worse, its executemany (the driver gives the GIL up
around each row's ``sqlite3_step`` and has to win it back from the event loop every time)
cost a logging server a quarter of its throughput at 16 clients (benchmarks/README.md).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from engine.process_setup import default_start_method
from service.monitoring.aggregates import UNSEEN_VALUES_PER_HOUR
from service.monitoring.writer import GAUGE_SECONDS, Batch, Outcome, Shipped, serve, stack

logger = logging.getLogger(__name__)

# Requests shipped per batch (one transaction) at most; a batch is what came in the
# LINGER_SECONDS since the thread last looked, up to this. Two seconds: a batch's counts upsert
# (a row per model, hour, column and bin, ~1,000 for a 40-feature model) and its commit cost
# about the same whatever its size, and at 16 clients they were over half of the writer
# process's samples with 1 s batches (benchmarks/README.md: 0.5 s lost 18% of a server's
# throughput, 1 s 4.9-9%). Rows reach the log up to two seconds late; feedback and shutdown
# do not wait for it (they wake the thread).
BATCH_REQUESTS = 4000
LINGER_SECONDS = 2.0
LINGER_STEP = 0.02
# Seconds to wait for the writer process to end after it was asked to.
STOP_SECONDS = 10.0
Cell = Callable[[int, str], Any]


class LoggedRequest(NamedTuple):
    """One predict's rows, as handed to the log (no work done on them yet). A named tuple,
    not a frozen dataclass: its ``__init__`` set each of the ten fields through
    ``object.__setattr__``, 3.2 µs a predict against 1.0 µs for the tuple."""

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
        unseen_values: int = UNSEEN_VALUES_PER_HOUR,
    ) -> None:
        # The writer process opens its own engine on the same database.
        self.database_url = engine.url.render_as_string(hide_password=False)
        self.rate = rate
        self.max_rows = max_rows
        self.counts = LogCounts(Counter())
        # The latest PSI by model (and feature), for the gauges: from a report, or from the
        # writer's refresh after a batch.
        self.feature_psi: dict[str, dict[str, float]] = {}
        self.prediction_psi: dict[str, float] = {}
        # Requests waiting to be shipped. A deque, not a queue.Queue: appending takes no lock
        # and wakes nobody; the thread looks every ``linger`` seconds (or when woken by a
        # drain or stop).
        self._pending: deque[LoggedRequest] = deque()
        self.queue_size = queue_size
        self._random = np.random.default_rng(seed)
        self._thread: threading.Thread | None = None
        # Guards ``_writing``; notified when nothing is left in hand or pending.
        self._idle = threading.Condition()
        self._writing = False
        self._stopping = False
        self.linger = linger
        self._wake = threading.Event()
        self.gauge_seconds = gauge_seconds
        # Distinct unseen values kept per model, hour and feature (read when the writer starts).
        self.unseen_values = unseen_values
        # Models forgotten since the last batch: the writer drops what it keeps of them.
        self._forget: list[str] = []
        self._process: BaseProcess | None = None
        self._inbox: Connection | None = None  # the writer's, our sending end
        self._outbox: Connection | None = None  # the writer's answers, our receiving end

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    @property
    def writer_process(self) -> BaseProcess | None:
        """The writer process, once a batch has started it."""
        return self._process

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
        """Write what is queued (up to ``timeout``), then end the thread and the writer."""
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
                while self._pending or self._forget or self._writing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    # Short waits: a request submitted after the thread's last look is only
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

    def forget(self, model_id: str) -> None:
        """Drop what is remembered of a model (its baseline; a deleted model's gauges)."""
        self._forget.append(model_id)
        self.feature_psi.pop(model_id, None)
        self.prediction_psi.pop(model_id, None)

    # --- the shipping thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                # Linger: one-row predicts then share a batch's commit and its binning, and
                # the thread takes the GIL a few times a second, not once a request (Kafka's
                # producers batch with linger.ms for the same reason). A drain (feedback,
                # stop) wakes it at once.
                self._wake.wait(self.linger)
                self._ship_pending()
            self._ship_pending()
        finally:
            self._end_writer()

    def _ship_pending(self) -> None:
        """Ship everything pending, ``BATCH_REQUESTS`` requests a batch, each written before
        the next is sent."""
        with self._idle:
            self._writing = True
        try:
            while self._pending or self._forget:
                taken: list[LoggedRequest] = []
                with contextlib.suppress(IndexError):  # popleft is atomic; the deque only grows
                    while len(taken) < BATCH_REQUESTS:
                        taken.append(self._pending.popleft())
                self._ship(taken)
        finally:
            with self._idle:
                self._writing = False
                self._idle.notify_all()

    def _ship(self, taken: list[LoggedRequest]) -> None:
        forget, self._forget = self._forget, []
        by_model: dict[str, list[LoggedRequest]] = {}
        try:
            for request in taken:
                by_model.setdefault(request.model_id, []).append(request)
            # One stack of arrays per model: pickled in one piece, whatever the requests.
            requests = [
                shipped
                for group in by_model.values()
                if (shipped := self._sampled_group(group)) is not None
            ]
        except Exception:  # a request the log cannot read costs its batch, never the thread
            logger.warning("prediction log: a batch could not be prepared", exc_info=True)
            self.counts.failed += sum(len(request.ids) for request in taken)
            return
        running = self._process is not None and self._process.is_alive()
        if not requests and (not forget or not running):
            return  # a writer started afresh remembers nothing to forget
        n_rows = sum(len(request.ids) for request in requests)
        try:
            inbox, outbox = self._writer()
            inbox.send(Batch(forget, requests))
            outcome: Outcome = outbox.recv()
        except Exception:  # the writer died, or would not start: its batch is lost, not the log
            logger.warning("prediction log: the writer process failed a batch", exc_info=True)
            self.counts.failed += n_rows
            self._end_writer()
            return
        self.counts.logged.update(outcome.logged)
        self.counts.failed += outcome.failed
        self.counts.trimmed += outcome.trimmed
        for model_id, (features, prediction) in outcome.gauges.items():
            self.feature_psi[model_id] = features
            if prediction is not None:
                self.prediction_psi[model_id] = prediction

    def _sampled_group(self, group: list[LoggedRequest]) -> Shipped | None:
        """One model's requests' sampled rows, stacked; None when none was drawn."""
        if self.rate >= 1 and len(group) > 1:
            return _whole(group)
        pieces = [shipped for request in group if (shipped := self._sampled(request)) is not None]
        return stack(pieces) if pieces else None

    def _sampled(self, request: LoggedRequest) -> Shipped | None:
        """``request``'s sampled rows as the writer takes them; None when none was drawn.

        Sampling comes first, so rows sampled out cost nothing more; the unseen categories are
        found here because the text the client sent is only in the request's body."""
        n = len(request.ids)
        if self.rate >= 1:
            chosen = None
        else:
            chosen = np.flatnonzero(self._random.random(n) < self.rate)
            if not chosen.size:
                return None
        predictions = np.asarray(request.predictions)
        if chosen is None:
            X, ids, proba = request.X, list(request.ids), request.proba
        else:
            X = request.X[chosen]
            ids = [request.ids[i] for i in chosen.tolist()]
            proba = None if request.proba is None else request.proba[chosen]
            predictions = predictions[chosen]
        return Shipped(
            model_id=request.model_id,
            logged_at=[request.logged_at],
            sizes=[len(ids)],
            X=X,
            predictions=predictions,
            proba=proba,
            with_proba=None,
            ids=ids,
            features=request.features
            if isinstance(request.features, list)
            else list(request.features),
            classes=request.classes,
            unseen=_unseen(request, X, chosen),
        )

    def _writer(self) -> tuple[Connection, Connection]:
        """The writer process's pipes, starting it first if it is not running."""
        if self._process is not None and self._process.is_alive():
            assert self._inbox is not None and self._outbox is not None
            return self._inbox, self._outbox
        self._end_writer()
        # A fork server, not fork: the API process runs threads (engine.process_setup). Its
        # preload is left as the worker's fit processes set it: the writer imports its own.
        forkserver = default_start_method(allow_fork=False) == "forkserver"
        context = (
            multiprocessing.get_context("forkserver")
            if forkserver
            else multiprocessing.get_context("spawn")
        )
        inbox_read, inbox_write = context.Pipe(duplex=False)
        outbox_read, outbox_write = context.Pipe(duplex=False)
        process = context.Process(
            target=serve,
            args=(
                inbox_read,
                outbox_write,
                self.database_url,
                self.max_rows,
                self.gauge_seconds,
                self.unseen_values,
            ),
            name="coppice-prediction-log",
            daemon=True,
        )
        process.start()
        # Our copies of the writer's ends closed: its death then reads as the pipe's end.
        inbox_read.close()
        outbox_write.close()
        self._process, self._inbox, self._outbox = process, inbox_write, outbox_read
        return inbox_write, outbox_read

    def _end_writer(self) -> None:
        """Ask the writer process to end (it has answered every batch sent), and wait."""
        process, inbox, outbox = self._process, self._inbox, self._outbox
        self._process = self._inbox = self._outbox = None
        if inbox is not None:
            with contextlib.suppress(OSError):
                inbox.send(None)
            inbox.close()
        if process is not None:
            process.join(STOP_SECONDS)
            if process.is_alive():
                logger.warning("prediction log: the writer process did not end; killing it")
                process.kill()
                process.join(STOP_SECONDS)
        if outbox is not None:
            outbox.close()


def _whole(group: list[LoggedRequest]) -> Shipped:
    """Every row of one model's requests, stacked as ``stack`` stacks their ``Shipped``
    pieces, without a piece per request: under load a batch holds thousands of one-row
    requests, and a record and an array per request cost more than the rows."""
    first = group[0]
    sizes = [len(request.ids) for request in group]
    unseen: dict[int, dict[str, str]] = {}
    offset = 0
    for request, size in zip(group, sizes, strict=True):
        for k, sent in _unseen(request, request.X, None).items():
            unseen[offset + k] = sent
        offset += size
    labels = [request.predictions for request in group]
    if all(isinstance(piece, list) for piece in labels):
        predictions = np.asarray(list(chain.from_iterable(labels)))
    else:
        predictions = np.concatenate([np.asarray(piece) for piece in labels])
    proba = with_proba = None
    widths = [request.proba.shape[1] for request in group if request.proba is not None]
    if widths:
        proba = np.concatenate([
            np.full((size, widths[0]), np.nan) if request.proba is None else request.proba
            for request, size in zip(group, sizes, strict=True)
        ])  # fmt: skip
        with_proba = np.repeat([request.proba is not None for request in group], sizes)
    return Shipped(
        model_id=first.model_id,
        logged_at=[request.logged_at for request in group],
        sizes=sizes,
        X=np.concatenate([request.X for request in group]),
        predictions=predictions,
        proba=proba,
        with_proba=with_proba,
        ids=list(chain.from_iterable(request.ids for request in group)),
        features=first.features if isinstance(first.features, list) else list(first.features),
        classes=first.classes,
        unseen=unseen,
    )


def _unseen(
    request: LoggedRequest, X: npt.NDArray[np.float64], chosen: npt.NDArray[np.intp] | None
) -> dict[int, dict[str, str]]:
    """By sampled row: ``{feature: text}`` of categorical cells the encoder made missing
    although the client sent a value."""
    found: dict[int, dict[str, str]] = {}
    if request.cell is None or not request.categories:
        return found
    for j, name in enumerate(request.features):
        if name not in request.categories:
            continue
        for k in np.flatnonzero(np.isnan(X[:, j])).tolist():
            sent = request.cell(k if chosen is None else int(chosen[k]), name)
            if sent is not None:
                found.setdefault(k, {})[name] = str(sent)[:200]
    return found
