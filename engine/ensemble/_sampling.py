"""What each ensemble member sees: its rows (bootstrap or subsample) and its features.

Every member owns one 64-bit seed drawn in the parent before any work is dispatched. Its
sample is the first thing drawn from that seed, so the in-bag counts of any member can be
regenerated after fitting (for out-of-bag scores, importances and proximities) without
storing them, and the model is the same whatever ``n_jobs`` was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MemberSampling", "draw_member", "member_seeds", "resolve_count"]


@dataclass(frozen=True)
class MemberSampling:
    """How members draw rows and features (resolved to absolute counts)."""

    n_samples: int
    n_draws: int
    bootstrap: bool
    n_features: int
    n_feature_draws: int
    bootstrap_features: bool

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


def draw_member(
    rng: np.random.Generator, sampling: MemberSampling
) -> tuple[NDArray[np.int64], NDArray[np.int64] | None]:
    """In-bag count of every row, shape (n_samples,), and the member's features (or None).

    With ``bootstrap`` rows are drawn with replacement (a row drawn k times counts k);
    without, a subsample of ``n_draws`` distinct rows is taken (all rows when equal).
    """
    n = sampling.n_samples
    if sampling.bootstrap:
        counts = np.bincount(rng.integers(0, n, sampling.n_draws), minlength=n)
    elif sampling.n_draws < n:
        counts = np.zeros(n, dtype=np.int64)
        counts[rng.choice(n, sampling.n_draws, replace=False)] = 1
    else:
        counts = np.ones(n, dtype=np.int64)
    features: NDArray[np.int64] | None = None
    if sampling.subsamples_features:
        p = sampling.n_features
        if sampling.bootstrap_features:
            features = np.unique(rng.integers(0, p, sampling.n_feature_draws))
        else:
            features = np.sort(rng.choice(p, sampling.n_feature_draws, replace=False))
    return counts.astype(np.int64), features


def regenerate_counts(seed: int | np.uint64, sampling: MemberSampling) -> NDArray[np.int64]:
    """The in-bag counts a member drew during ``fit``."""
    return draw_member(np.random.default_rng(int(seed)), sampling)[0]
