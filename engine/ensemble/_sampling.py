"""What each ensemble member sees: its rows (bootstrap or subsample) and its features.

Every member owns one 64-bit seed drawn in the parent before any work is dispatched. Its
sample is the first thing drawn from that seed, so the in-bag counts of any member can be
regenerated after fitting (for out-of-bag scores, importances and proximities) without
storing them, and the model is the same whatever ``n_jobs`` was.

The rows are drawn block-wise, so that a fit whose rows are spread over Dask workers
(:mod:`engine.ensemble._forest_parts`) draws the same sample without any process holding a
count per row of the table (notes/distributed-data.md, §4.E; H2O's ``Sample.java`` seeds by
row for the same reason). The table's rows fall into blocks of ``block_rows`` consecutive
rows; the member's stream draws how many of its draws each block receives (a bootstrap: one
multinomial over the blocks, in proportion to their rows; a subsample without replacement:
one multivariate hypergeometric), then each block draws its own rows from a stream seeded by
(member seed, block) alone. The two stages give exactly the bootstrap's (or the
subsample's) distribution: a multinomial's counts, grouped, are multinomial, and given a
block's total its rows are drawn uniformly (Johnson, Kotz and Balakrishnan 1997, §35.1).
Whoever holds rows ``[start, stop)`` draws their counts from the totals and the seed
(:func:`counts_in_range`), whatever the number of holders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BOOTSTRAP_BLOCK_ROWS",
    "MemberSampling",
    "block_totals",
    "counts_in_range",
    "draw_member",
    "member_seeds",
    "resolve_count",
]

# Rows per block of the block-wise draw: the blocks' totals are drawn from the member's
# stream (one number per block), and a holder of rows draws whole blocks (at most two
# partial ones per holder), so a block is small beside a worker's rows and large beside
# the totals' draw.
BOOTSTRAP_BLOCK_ROWS = 1 << 16


@dataclass(frozen=True)
class MemberSampling:
    """How members draw rows and features (resolved to absolute counts)."""

    n_samples: int
    n_draws: int
    bootstrap: bool
    n_features: int
    n_feature_draws: int
    bootstrap_features: bool
    block_rows: int = BOOTSTRAP_BLOCK_ROWS

    @property
    def draws_rows(self) -> bool:
        """Whether members draw their rows (else every row counts once)."""
        return self.bootstrap or self.n_draws < self.n_samples

    @property
    def subsamples_features(self) -> bool:
        return self.n_feature_draws < self.n_features or self.bootstrap_features


def resolve_count(value: Any, total: int, name: str) -> int:
    """An int count, or a fraction of ``total`` (at least 1), as ``max_samples`` allows."""
    if value is None:
        return total
    if isinstance(value, float):
        return max(1, math.floor(value * total))
    if value > total:
        raise ValueError(f"{name}={value} exceeds the {total} available.")
    return int(value)


def member_seeds(root: np.random.SeedSequence, n_members: int) -> NDArray[np.uint64]:
    """One seed per member, drawn from the fit's root seed in the parent."""
    return root.generate_state(n_members, dtype=np.uint64).astype(np.uint64)


def block_totals(rng: np.random.Generator, sampling: MemberSampling) -> NDArray[np.int64]:
    """How many of a member's draws each block of rows receives, from the member's stream
    (the first thing drawn from it), shape (n_blocks,); None-like (empty) when the member
    draws no rows."""
    if not sampling.draws_rows:
        return np.zeros(0, dtype=np.int64)
    n, size = sampling.n_samples, sampling.block_rows
    rows = np.minimum(size, n - np.arange(0, n, size)).astype(np.int64)
    if rows.size == 1:
        return np.array([sampling.n_draws], dtype=np.int64)
    if sampling.bootstrap:
        return rng.multinomial(sampling.n_draws, rows / n).astype(np.int64)
    return rng.multivariate_hypergeometric(rows, sampling.n_draws).astype(np.int64)


def _block_counts(
    seed: int, block: int, n_rows: int, total: int, bootstrap: bool
) -> NDArray[np.int64]:
    """The in-bag counts of one block's ``n_rows`` rows given its ``total`` draws, from the
    block's own stream, seeded by the member's seed and the block."""
    rng = np.random.default_rng([int(seed), block])
    if bootstrap:
        return np.bincount(rng.integers(0, n_rows, total), minlength=n_rows).astype(np.int64)
    counts = np.zeros(n_rows, dtype=np.int64)
    counts[rng.choice(n_rows, total, replace=False)] = 1
    return counts


def counts_in_range(
    seed: int | np.uint64,
    totals: NDArray[np.int64],
    sampling: MemberSampling,
    start: int,
    stop: int,
) -> NDArray[np.int64]:
    """The in-bag counts of the global rows ``[start, stop)`` of a member with ``seed``
    whose blocks received ``totals`` (:func:`block_totals`), shape (stop - start,)."""
    if not sampling.draws_rows:
        return np.ones(stop - start, dtype=np.int64)
    size, n = sampling.block_rows, sampling.n_samples
    pieces = []
    for block in range(start // size, -(-stop // size)):
        low, high = block * size, min((block + 1) * size, n)
        counts = _block_counts(int(seed), block, high - low, int(totals[block]), sampling.bootstrap)
        pieces.append(counts[max(start, low) - low : min(stop, high) - low])
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def draw_features(rng: np.random.Generator, sampling: MemberSampling) -> NDArray[np.int64] | None:
    """The member's features (None: all), drawn after its rows' block totals."""
    if not sampling.subsamples_features:
        return None
    p = sampling.n_features
    if sampling.bootstrap_features:
        return np.unique(rng.integers(0, p, sampling.n_feature_draws))
    return np.sort(rng.choice(p, sampling.n_feature_draws, replace=False))


def draw_member(
    rng: np.random.Generator, sampling: MemberSampling, seed: int | np.uint64
) -> tuple[NDArray[np.int64], NDArray[np.int64] | None]:
    """In-bag count of every row, shape (n_samples,), and the member's features (or None);
    ``rng`` is the member's stream, ``default_rng(seed)``.

    With ``bootstrap`` rows are drawn with replacement (a row drawn k times counts k);
    without, a subsample of ``n_draws`` distinct rows is taken (all rows when equal). Both
    are drawn block-wise (see the module's docstring).
    """
    totals = block_totals(rng, sampling)
    counts = counts_in_range(seed, totals, sampling, 0, sampling.n_samples)
    return counts, draw_features(rng, sampling)


def regenerate_counts(seed: int | np.uint64, sampling: MemberSampling) -> NDArray[np.int64]:
    """The in-bag counts a member drew during ``fit``."""
    return draw_member(np.random.default_rng(int(seed)), sampling, seed)[0]
