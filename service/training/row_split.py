"""A job's holdout split and scored training rows, chosen from counts alone.

:func:`service.training.split.holdout_split` and :func:`service.training.run.
scored_training_rows` take the whole target: per class (in sorted label order) a seeded
permutation of its rows, the first ``take`` of it held out. Only the permutation needs the
rows' number, not the rows: permuting a class's rows is indexing them by a permutation of
``range(m)`` (NumPy's shuffle swaps positions, whatever they hold), so the ``i``-th row of the
class to hold out is the one of rank ``perm[i]`` among that class's rows in table order. An
out-of-core run (:mod:`service.training.out_of_core`) draws those ranks here from each part's
class counts, with the same generator calls, and each worker turns its parts' ranks into rows
(:func:`service.training.worker_parts.read_worker_part`): the same split as a run with the
table in memory, while the fit process holds four bytes per held-out row, never the target.

A regression target is one group (every row with a target), as ``holdout_split`` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.training.spec import TrainingError

Ranks = npt.NDArray[np.int32]


@dataclass(frozen=True)
class PartRanks:
    """Per part, per group: the ranks (among the part's rows of the group, ascending) of its
    held-out rows, and of its scored training rows (among its training rows of the group;
    ``scored`` None: every training row is scored)."""

    held_out: list[tuple[Ranks, ...]]
    scored: list[tuple[Ranks, ...]] | None
    n_train: int
    n_validation: int


def split_by_counts(
    counts: npt.NDArray[np.int64],
    fraction: float,
    score_rows: int,
    *,
    classification: bool,
    seed: int,
) -> PartRanks:
    """The split of a table whose parts hold ``counts[p, g]`` rows of group ``g`` (classes in
    sorted label order; one column for regression): ``fraction`` held out as
    ``holdout_split(y, fraction, seed=seed)`` holds them out (none for 0), and the training
    rows scored as ``scored_training_rows(y, train, …, score_rows)`` picks them."""
    sizes = counts.sum(axis=0)
    n_rows = int(sizes.sum())
    if fraction > 0:
        held = _chosen(sizes, fraction, classification, seed)
        if sum(ranks.size for ranks in held) == 0:
            raise TrainingError(
                "too_few_rows",
                f"A holdout of {fraction:g} of {n_rows} rows leaves no validation rows; use a "
                'larger holdout, more rows, or {"holdout": 0} for no validation.',
            )
    else:
        held = [np.zeros(0, dtype=np.int32) for _ in range(sizes.size)]
    held_out = _by_part(held, counts)
    train_counts = counts - np.array(
        [[ranks.size for ranks in part] for part in held_out], dtype=np.int64
    ).reshape(counts.shape)
    n_validation = sum(ranks.size for ranks in held)
    n_train = n_rows - n_validation
    scored = None
    if n_train > score_rows:
        chosen = _chosen(train_counts.sum(axis=0), score_rows / n_train, classification, seed)
        scored = _by_part(chosen, train_counts)
    return PartRanks(held_out, scored, n_train, n_validation)


def _chosen(
    sizes: npt.NDArray[np.int64], fraction: float, classification: bool, seed: int
) -> list[Ranks]:
    """Per group, the sorted ranks ``holdout_split`` draws, with its generator calls."""
    rng = np.random.default_rng(seed)
    if not classification:
        (n,) = sizes
        take = min(round(fraction * int(n)), int(n) - 2)
        return [np.sort(_permutation(rng, int(n))[: max(take, 0)])]
    chosen = []
    for size in sizes.tolist():  # every class has rows: the classes are those found
        permuted = _permutation(rng, size)
        chosen.append(np.sort(permuted[: min(round(fraction * size), size - 1)]))
        del permuted
    return chosen


def _permutation(rng: np.random.Generator, n: int) -> Ranks:
    """``rng.permutation(n)`` as 4-byte integers: the same swaps, half the memory."""
    ranks = np.arange(n, dtype=np.int32)
    rng.shuffle(ranks)
    return ranks


def _by_part(chosen: list[Ranks], counts: npt.NDArray[np.int64]) -> list[tuple[Ranks, ...]]:
    """Each part's share of each group's ranks, as ranks among the part's own rows."""
    starts = np.vstack([np.zeros((1, counts.shape[1]), np.int64), np.cumsum(counts, axis=0)])
    parts = []
    for p in range(counts.shape[0]):
        share = []
        for g, ranks in enumerate(chosen):
            low, high = np.searchsorted(ranks, [starts[p, g], starts[p + 1, g]])
            share.append((ranks[low:high] - starts[p, g]).astype(np.int32))
        parts.append(tuple(share))
    return parts


def tag_rows(
    group: npt.NDArray[np.intp],
    n_groups: int,
    held_out: tuple[Ranks, ...],
    scored: tuple[Ranks, ...] | None,
) -> npt.NDArray[np.int8]:
    """On a worker: each row of a part tagged by its role, from its group (-1: no target)
    and the part's ranks (:class:`PartRanks`)."""
    tags = np.where(group >= 0, TRAIN, NONE).astype(np.int8)
    for g in range(n_groups):
        members = np.flatnonzero(group == g)
        tags[members[held_out[g]]] = VALIDATION
        training = members[tags[members] == TRAIN]
        tags[training if scored is None else training[scored[g]]] = SCORED
    return tags


# A row's role (tag_rows): no target, a training row, a training row the train metrics score,
# a validation row.
NONE, TRAIN, SCORED, VALIDATION = 0, 1, 2, 3
