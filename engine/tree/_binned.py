"""Training from rows binned elsewhere: the plan of the rows that place the edges, the binned
input an estimator fits from in place of ``X``, and values that route as the binned rows do.

A caller whose rows never sit in memory as one float matrix (Parquet parts read one at a time,
Dask partitions) fits a histogram estimator in three steps:

1. ``plan = estimator.binning_plan(n_rows, n_features)``: the unfitted :class:`BinMapper` the
   estimator's own ``fit`` would build (its ``max_bins``, its seed) and the sorted rows whose
   values that fit would read for the edges.
2. Gather those rows' values, ``mapper = plan.fit(X_rows)``; then bin every row piece by piece
   with ``mapper.transform`` into one code matrix (binning is row by row, so pieces binned
   apart are the matrix binned whole).
3. ``estimator.fit(Binned(codes, mapper), y)``: the model is the one ``fit(X, y)`` learns, bit
   for bit, since the edges, the codes and the seeds are the same.

Wherever ``fit`` needed float values besides the codes (out-of-bag predictions, boosting's
routing of rows a tree did not grow on), :func:`routing_values` stands in: the split "bin ≤ b"
is stored as ``x <= thresholds_[f, b]``, so the value ``thresholds_[f, code]`` (for the last
bin, the next float past the last edge) goes the way the row's own value goes at every split
the trees can hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._binning import BinMapper
from engine.tree._common import missing_code

__all__ = [
    "Binned",
    "BinningPlan",
    "apply_codes",
    "plan_binning",
    "routing_table",
    "routing_values",
]

# Rows decoded to floats at a time where codes stand in for values (64 Ki rows × 8 B a feature).
ROUTING_CHUNK_ROWS = 1 << 16


@dataclass(frozen=True, eq=False)
class Binned:
    """Training rows already binned: ``codes = mapper.transform(X)`` and the fitted mapper.

    Histogram estimators (decision trees, random forests, extra trees, XGBoost-style boosting)
    take it in place of ``X`` in ``fit``; ``mapper`` must come from their ``binning_plan``.
    """

    codes: NDArray[np.unsignedinteger[Any]]
    mapper: BinMapper

    @property
    def shape(self) -> tuple[int, int]:
        n_rows, n_features = self.codes.shape
        return int(n_rows), int(n_features)


@dataclass(frozen=True, eq=False)
class BinningPlan:
    """An estimator's binning before it has seen values: the mapper and the rows it reads."""

    mapper: BinMapper  # unfitted: the estimator's settings and seed
    categorical: NDArray[np.bool_]
    rows: NDArray[np.intp]  # sorted indices of the training rows whose values place the edges

    def fit(self, X_rows: NDArray[np.float64]) -> BinMapper:
        """The fitted mapper, from ``X[self.rows]`` of the training matrix, in that order."""
        if X_rows.shape != (self.rows.size, self.categorical.size):
            raise ValueError(
                f"The plan's rows hold {self.rows.size} × {self.categorical.size} values; "
                f"got {X_rows.shape}."
            )
        return self.mapper.fit_sample(X_rows, self.categorical)


def plan_binning(
    mapper: BinMapper,
    categorical: NDArray[np.bool_],
    n_rows: int,
    positive: NDArray[np.bool_] | None = None,
) -> BinningPlan:
    """The plan for ``mapper`` fitted, as the estimators fit it, on the rows of positive
    weight (``positive``; all rows when None) of an ``n_rows``-row matrix."""
    if positive is None or positive.all():
        rows = mapper.sample_rows(n_rows)
    else:
        candidates = np.flatnonzero(positive)
        rows = candidates[mapper.sample_rows(candidates.size)]
    return BinningPlan(mapper, np.asarray(categorical, dtype=bool), rows.astype(np.intp))


def check_binned(binned: Binned, max_bins: int, categorical: NDArray[np.bool_], owner: str) -> None:
    """Refuse codes binned with settings other than the estimator's own."""
    mapper = binned.mapper
    if not hasattr(mapper, "thresholds_"):
        raise ValueError(f"{owner} was given a Binned input whose mapper is not fitted.")
    if mapper.max_bins != max_bins or not np.array_equal(mapper.is_categorical_, categorical):
        raise ValueError(
            f"{owner} cannot grow on bins made with other max_bins or categorical_features "
            "than its own; bin with the mapper of its binning_plan."
        )
    if binned.codes.ndim != 2 or binned.codes.shape[1] != categorical.size:
        raise ValueError(f"{owner}: Binned codes must be (n_samples, {categorical.size}).")


def routing_table(mapper: BinMapper, *, raw: bool = False) -> NDArray[np.float64]:
    """``table[f, code]``: the value standing in for ``code`` of feature ``f``."""
    n_features = mapper.n_bins_.size
    width = int(mapper.n_bins_.max(initial=1))
    table = np.full((n_features, width), np.nan)
    for f in range(n_features):
        n_bins = int(mapper.n_bins_[f])
        if mapper.is_categorical_[f]:
            # Encoded, the category's code; raw, the category value the dataset holds.
            codes = np.arange(n_bins, dtype=np.float64)
            table[f, :n_bins] = mapper.categories_[f, :n_bins] if raw else codes
        else:
            edges = mapper.thresholds_[f, : n_bins - 1]
            # The last bin: the float just past the last edge (finite, as inputs must be).
            last = np.nextafter(edges[-1], np.inf) if edges.size else 0.0
            table[f, :n_bins] = np.append(edges, last)
    # One more column for the missing code, which is NaN whatever the feature.
    return np.concatenate([table, np.full((n_features, 1), np.nan)], axis=1)


def routing_values(
    mapper: BinMapper, codes: NDArray[np.unsignedinteger[Any]], *, raw: bool = False
) -> NDArray[np.float64]:
    """Float rows that every tree grown on ``mapper``'s bins routes as the binned rows.

    ``raw=False``: as ``encode_for_prediction`` gives them (categories as their codes), for a
    fitted tree's ``apply``/``predict``. ``raw=True``: categories as the values ``X`` held, for
    an estimator's own ``predict``. Missing codes become NaN.
    """
    return decode(routing_table(mapper, raw=raw), codes)


def decode(
    table: NDArray[np.float64], codes: NDArray[np.unsignedinteger[Any]]
) -> NDArray[np.float64]:
    """``codes`` through a :func:`routing_table`."""
    last = table.shape[1] - 1
    index = np.where(codes == missing_code(codes.dtype), last, np.minimum(codes, last - 1))
    return table[np.arange(table.shape[0])[None, :], index]


def apply_codes(
    tree: Any, mapper: BinMapper, codes: NDArray[np.unsignedinteger[Any]]
) -> NDArray[np.intp]:
    """``tree.apply`` of the rows ``codes`` holds, decoded a chunk at a time."""
    table = routing_table(mapper)
    leaves = np.empty(codes.shape[0], dtype=np.intp)
    for start in range(0, codes.shape[0], ROUTING_CHUNK_ROWS):
        stop = start + ROUTING_CHUNK_ROWS
        leaves[start:stop] = tree.apply(decode(table, codes[start:stop]))
    return leaves
