"""Hourly counts of the prediction log: what the writer adds up, and what a report sums.

A drift report needs, per feature, how many of the window's rows fell in each baseline bin;
reading a blob per row for that took 12.9 s over a million rows. So the log's writer keeps the
counts themselves, per model and hour (``prediction_counts``, and the unseen values in
``prediction_unseen``), added in the same transaction as the rows they count and taken away
again when the per-model cap deletes rows. A report then sums a few thousand small rows.

Windows are whole hours: a report's ``since`` is rounded down to its hour and its ``until`` up
(docs/monitoring.md). :func:`tally_rows` counts rows the same way, which is how the tests hold
the hourly counts equal to a count over the rows themselves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

HOUR = timedelta(hours=1)
# The rows of ``prediction_counts`` whose ``column_index`` is this count the logged rows.
ROWS = -1
# Distinct unseen values kept per model, hour and feature: a broken upstream that sends a new
# value on every row (an id in a category's place) must not grow a table as fast as the log.
# The unseen count itself stays exact; only the "top values" list is drawn from these.
UNSEEN_VALUES_PER_HOUR = 100


def hour_of(moment: datetime) -> datetime:
    """The start of ``moment``'s hour, in UTC."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def whole_hours(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """``[since, until)`` widened to whole hours: ``since`` down, ``until`` up."""
    start = hour_of(since)
    end = hour_of(until)
    if end < until.astimezone(UTC):
        end += HOUR
    return start, end


@dataclass
class HourCounts:
    rows: int = 0
    # (columns, bins) counts: columns are the features then the prediction; None when no row
    # of the hour had bins (a model without a baseline).
    bins: npt.NDArray[np.int64] | None = None
    # By feature position: how often each unseen value was logged.
    unseen: dict[int, Counter[str]] = field(default_factory=dict)

    def add_bins(self, counts: npt.NDArray[np.int64]) -> None:
        if self.bins is None:
            self.bins = counts.copy()
            return
        self.bins = _padded_sum(self.bins, counts)


def _padded_sum(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    rows, width = max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])
    out = np.zeros((rows, width), dtype=np.int64)
    out[: a.shape[0], : a.shape[1]] += a
    out[: b.shape[0], : b.shape[1]] += b
    return out


def bin_counts(bins: npt.NDArray[np.uint16]) -> npt.NDArray[np.int64]:
    """``(columns, bins)`` counts of a ``(rows, columns)`` matrix of bin numbers."""
    n_rows, n_columns = bins.shape
    width = int(bins.max()) + 1 if n_rows else 1
    flat = bins.astype(np.int64) + np.arange(n_columns, dtype=np.int64) * width
    return np.bincount(flat.ravel(), minlength=n_columns * width).reshape(n_columns, width)


class Tally:
    """Counts by ``(model id, hour)``, built from the rows of a batch (or of a window)."""

    def __init__(self) -> None:
        self.hours: dict[tuple[str, datetime], HourCounts] = {}

    def add(
        self,
        model_id: str,
        hour: datetime,
        n_rows: int,
        bins: npt.NDArray[np.uint16] | None,
        unseen: Iterable[tuple[int, str]] = (),
    ) -> None:
        counts = self.hours.setdefault((model_id, hour), HourCounts())
        counts.rows += n_rows
        if bins is not None and bins.shape[0]:
            counts.add_bins(bin_counts(bins))
        for column, value in unseen:
            counts.unseen.setdefault(column, Counter())[value] += 1

    def count_rows(self) -> Iterator[dict[str, Any]]:
        """Rows of ``prediction_counts`` (non-zero counts only), in key order."""
        for (model_id, hour), counts in sorted(self.hours.items()):
            if counts.rows:
                yield {"model_id": model_id, "hour": hour, "column_index": ROWS, "bin": 0,
                       "count": counts.rows}  # fmt: skip
            if counts.bins is None:
                continue
            columns, bins = np.nonzero(counts.bins)
            # The counts read in one NumPy call, not one scalar per count: a batch of the
            # writer holds a few hundred of them.
            values = counts.bins[columns, bins].tolist()
            for column, bin_, count in zip(columns.tolist(), bins.tolist(), values, strict=True):
                yield {"model_id": model_id, "hour": hour, "column_index": column, "bin": bin_,
                       "count": count}  # fmt: skip

    def unseen_rows(self) -> Iterator[tuple[tuple[str, datetime, int], Counter[str]]]:
        """``((model id, hour, feature position), values)`` in key order."""
        for (model_id, hour), counts in sorted(self.hours.items()):
            for column, values in sorted(counts.unseen.items()):
                yield (model_id, hour, column), values


def tally_rows(
    model_id: str,
    rows: Iterable[tuple[datetime, bytes | None, dict[str, Any] | None]],
    features: list[str],
    width: int | None,
) -> Tally:
    """The counts of logged rows ``(logged_at, bins, unseen)``: what the writer adds for them
    (``width``: values per ``bins`` blob, None when the model has no baseline)."""
    position = {name: j for j, name in enumerate(features)}
    by_hour: dict[datetime, list[tuple[bytes | None, dict[str, Any] | None]]] = {}
    for logged_at, bins, unseen in rows:
        by_hour.setdefault(hour_of(logged_at), []).append((bins, unseen))
    tally = Tally()
    for hour, group in by_hour.items():
        blobs = [bytes(b) for b, _ in group if b is not None]
        matrix = None
        if blobs and width:
            matrix = np.frombuffer(b"".join(blobs), dtype=np.uint16).reshape(-1, width)
        found = [
            (position[name], str(value))
            for _, unseen in group
            for name, value in (unseen or {}).items()
            if name in position
        ]
        tally.add(model_id, hour, len(group), matrix, found)
    return tally


@dataclass
class WindowCounts:
    """What a report reads of a window: totals, unseen values, and per hour the rows and the
    prediction's bins (for the timeline)."""

    rows: int = 0
    bins: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    unseen: dict[int, Counter[str]] = field(default_factory=dict)
    hourly_rows: dict[datetime, int] = field(default_factory=dict)
    hourly_prediction: dict[datetime, npt.NDArray[np.int64]] = field(default_factory=dict)

    def column(self, j: int, n_bins: int) -> npt.NDArray[np.int64]:
        counts = self.bins.get(j)
        out = np.zeros(n_bins, dtype=np.int64)
        if counts is not None:
            out[: min(n_bins, counts.size)] = counts[:n_bins]
        return out

    @classmethod
    def from_tally(cls, tally: Tally, prediction_column: int) -> WindowCounts:
        out = cls()
        for (_, hour), counts in tally.hours.items():
            out.rows += counts.rows
            out.hourly_rows[hour] = out.hourly_rows.get(hour, 0) + counts.rows
            if counts.bins is not None:
                for j in range(counts.bins.shape[0]):
                    out.bins[j] = _add(out.bins.get(j), counts.bins[j])
                if prediction_column < counts.bins.shape[0]:
                    out.hourly_prediction[hour] = _add(
                        out.hourly_prediction.get(hour), counts.bins[prediction_column]
                    )
            for j, values in counts.unseen.items():
                out.unseen.setdefault(j, Counter()).update(values)
        return out

    @classmethod
    def from_sums(
        cls,
        totals: Iterable[tuple[int, int, int]],
        hourly: Iterable[tuple[datetime, int, int, int]],
        unseen: Iterable[tuple[int, str, int]],
        prediction_column: int,
    ) -> WindowCounts:
        """From the sums over ``prediction_counts``: ``(column, bin, count)`` totals,
        ``(hour, column, bin, count)`` of the rows and prediction columns, and ``(column,
        value, count)`` of ``prediction_unseen``."""
        out = cls()
        for column, bin_, count in totals:
            if column == ROWS:
                out.rows += int(count)
            elif count:
                out.bins[column] = _add_at(out.bins.get(column), bin_, int(count))
        for hour, column, bin_, count in hourly:
            if column == ROWS:
                out.hourly_rows[hour] = out.hourly_rows.get(hour, 0) + int(count)
            elif column == prediction_column and count:
                out.hourly_prediction[hour] = _add_at(
                    out.hourly_prediction.get(hour), bin_, int(count)
                )
        for column, value, count in unseen:
            if count:
                out.unseen.setdefault(column, Counter())[value] += int(count)
        return out


def _add(a: npt.NDArray[np.int64] | None, b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    if a is None:
        return b.astype(np.int64).copy()
    out: npt.NDArray[np.int64] = _padded_sum(a[None, :], b[None, :].astype(np.int64))[0]
    return out


def _add_at(a: npt.NDArray[np.int64] | None, at: int, count: int) -> npt.NDArray[np.int64]:
    if a is None or a.size <= at:
        grown = np.zeros(at + 1, dtype=np.int64)
        if a is not None:
            grown[: a.size] = a
        a = grown
    a[at] += count
    return a


def steps(since: datetime, until: datetime, most: int = 48) -> list[tuple[datetime, datetime]]:
    """The timeline's periods over a whole-hour window: the shortest of 1, 2, 3, 6, 12 hours
    or whole days that gives at most ``most`` of them."""
    hours = max(1, math.ceil((until - since) / HOUR))
    step = next((s for s in (1, 2, 3, 6, 12) if math.ceil(hours / s) <= most), None)
    if step is None:
        step = 24 * math.ceil(hours / (24 * most))
    out = []
    start = since
    while start < until:
        end = min(start + step * HOUR, until)
        out.append((start, end))
        start = end
    return out
