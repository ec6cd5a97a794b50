"""The split drawn from class counts alone (``service.training.row_split``) is the split
``holdout_split`` and ``scored_training_rows`` draw from the whole target."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from service.training import fit_steps, run
from service.training.row_split import NONE, SCORED, TRAIN, VALIDATION, split_by_counts, tag_rows
from service.training.spec import TrainingError
from service.training.split import holdout_split


def _table(classification: bool, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A target with missing values; each row's group (-1: no target) and the group count."""
    rng = np.random.default_rng(n)
    known = rng.random(n) > 0.1
    if classification:
        # Unequal classes, one of them rare.
        group = np.searchsorted([0.6, 0.97], rng.random(n))
        return np.where(known, group, -1), np.array(["a", "b", "c"])[group], 3
    return np.where(known, 0, -1), rng.normal(size=n), 1


@pytest.mark.parametrize("classification", [True, False])
@pytest.mark.parametrize(
    ("n", "fraction", "score_rows"), [(997, 0.2, 100), (5_003, 0.3, 10_000), (8_000, 0.0, 700)]
)
def test_the_split_from_counts_is_the_split_from_the_target(
    monkeypatch: pytest.MonkeyPatch,
    classification: bool,
    n: int,
    fraction: float,
    score_rows: int,
) -> None:
    group, values, n_groups = _table(classification, n)
    sizes = [1, 120, 0, 400, n - 521]  # an empty part, a part of one row
    bounds = np.cumsum([0, *sizes])
    counts = np.array(
        [[np.sum(group[a:b] == g) for g in range(n_groups)] for a, b in pairwise(bounds)]
    )
    ranks = split_by_counts(counts, fraction, score_rows, classification=classification, seed=3)
    tags = np.concatenate(
        [
            tag_rows(
                group[a:b],
                n_groups,
                ranks.held_out[p],
                None if ranks.scored is None else ranks.scored[p],
            )
            for p, (a, b) in enumerate(pairwise(bounds))
        ]
    )
    # The in-memory run: the rows with a target, split and scored.
    y = values[group >= 0]
    if fraction:
        train, validation = holdout_split(y, fraction, classification=classification, seed=3)
    else:
        train, validation = np.arange(y.size), np.zeros(0, dtype=np.intp)
    monkeypatch.setattr(fit_steps, "TRAIN_SCORE_ROWS", score_rows)
    scored = np.sort(run.scored_training_rows(y, train, classification, 3))
    kept = tags[group >= 0]
    assert np.all(tags[group < 0] == NONE)
    np.testing.assert_array_equal(np.flatnonzero(kept == VALIDATION), validation)
    np.testing.assert_array_equal(np.flatnonzero((kept == TRAIN) | (kept == SCORED)), train)
    np.testing.assert_array_equal(np.flatnonzero(kept == SCORED), scored)
    assert (ranks.n_train, ranks.n_validation) == (train.size, validation.size)


def test_a_holdout_that_leaves_no_validation_row_is_refused_as_holdout_split_refuses() -> None:
    counts = np.array([[1, 1]])
    with pytest.raises(TrainingError) as error:
        split_by_counts(counts, 0.2, 100, classification=True, seed=0)
    assert error.value.code == "too_few_rows"
    with pytest.raises(TrainingError):
        holdout_split(np.array(["a", "b"]), 0.2, classification=True, seed=0)
