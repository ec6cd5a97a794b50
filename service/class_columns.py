"""Class-probability columns in the order of a model record's classes.

A job's record lists every class of its target; an estimator fitted on part of the rows (a
fold, a member of an ensemble) may have seen fewer. Training metrics, out-of-bag metrics and
both predict protocols put its columns where the record's classes are, and zeros for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt


def over_classes(
    scores: npt.NDArray[np.float64], seen: Iterable[object], classes: list[str]
) -> npt.NDArray[np.float64]:
    """``scores`` (a column per class in ``seen``, an estimator's ``classes_``) as columns of
    all ``classes``; a class the estimator never saw gets a column of zeros."""
    labels = [str(label) for label in seen]
    if labels == classes:
        return scores
    full = np.zeros((scores.shape[0], len(classes)))
    full[:, [classes.index(label) for label in labels]] = scores
    return full
