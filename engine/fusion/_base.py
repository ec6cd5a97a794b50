"""What every label-fusion combiner shares: members, out-of-fold labels, and the predict path.

A fusion combiner (fusion, as opposed to selection, takes every member to be competent over
the whole feature space; Kuncheva 2004) sees each member only through its crisp label
``s_i = D_i(x)``. It learns how to map the label vector ``s = (s_1, …, s_L)`` to a class from
labels the members gave to rows they were *not* fitted on: the rows are dealt into ``cv``
stratified folds, each member is fitted on ``cv − 1`` folds and labels the held-out one, and
afterwards every member is refitted on all rows (Kuncheva, *Combining Pattern Classifiers*,
ch. 4, trains the combiner on data the members did not see; cross-validation uses every row for
both). With ``prefit=True`` the members are used as given and the combiner is fitted on their
labels of the rows passed to ``fit``.
Folds, member fitting and member parameters are those of :mod:`engine.combine`.
Rows of zero weight take no fold (see :mod:`engine.combine._folds`), so zero weight means
"not there" for the members, the folds and the combiner's tables alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    Boolean,
    Constraint,
    CVSplits,
    Interval,
    NamedEstimators,
    NoneValue,
    RandomStateValue,
)
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X
from engine.base import ClassifierMixin, check_is_fitted
from engine.callbacks import Callback
from engine.combine._folds import resolve_splits
from engine.combine._members import FitPlan, Progress, check_accepts_sample_weight, fit_members
from engine.combine._named import NamedMembersEstimator
from engine.explain._background import background_sample
from engine.fusion._tables import encode_member_labels

__all__ = ["FUSION_CONSTRAINTS", "BaseLabelCombiner", "MemberLabels"]

FUSION_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimators": [NamedEstimators()],
    # One explicit split is a hold-out set; the test sets need not cover every row.
    "cv": [CVSplits(min_splits=1)],
    "prefit": [Boolean()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
    "random_state": [RandomStateValue()],
}


@dataclass(frozen=True, eq=False)
class MemberLabels:
    """A member's labels of rows as indices into ``classes`` (its held-out output)."""

    classes: NDArray[Any]
    name: str

    def __call__(self, estimator: Any, X: NDArray[np.float64]) -> NDArray[np.int64]:
        return encode_member_labels(estimator.predict(X), self.classes, self.name)


class BaseLabelCombiner(ClassifierMixin, NamedMembersEstimator):
    """Members, folds and the fit/predict skeleton of the label-fusion combiners.

    Subclasses implement :meth:`_fit_combiner` (learn from the out-of-fold label matrix)
    and :meth:`_combine` (class probabilities from a label matrix).
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = FUSION_CONSTRAINTS

    estimators: Any
    cv: Any
    prefit: bool
    n_jobs: int | None
    random_state: Any

    classes_: NDArray[Any]
    estimators_: list[Any]
    member_names_: list[str]
    n_features_in_: int

    @property
    def named_estimators_(self) -> dict[str, Any]:
        """The fitted members by name."""
        check_is_fitted(self)
        return dict(zip(self.member_names_, self.estimators_, strict=True))

    # -- fit ---------------------------------------------------------------------------------

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> BaseLabelCombiner:
        """Fit the members (unless ``prefit``) and the combiner on their out-of-fold labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), class labels
        sample_weight : array-like of shape (n_samples,), optional
            Passed to every member's ``fit`` and used to weigh the rows in the combiner's
            tables (each combiner's docstring says how).
        callbacks : list of callables, optional
            Each receives a :class:`~engine.callbacks.ProgressEvent` after every member fit
            and after the combiner's own fit.
        """
        self._validate_params()
        self._forget_fit()
        name = type(self).__name__
        X = check_X(X, estimator=name)
        labels = check_target(y, X.shape[0], numeric=False)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes, target = encode_labels(labels)
        names = [member_name for member_name, _ in self.estimators]
        self._check_member_names(names)
        if self.prefit:
            fitted = [estimator for _, estimator in self.estimators]
            member_labels = self._prefit_labels(fitted, names, X, classes)
            table_weights, progress = weights, Progress(name, 1, callbacks)
        else:
            weighted = sample_weight is not None
            fitted, member_labels, table_weights, progress = self._cross_fit(
                X, target, weights, classes, weighted, callbacks
            )
        self._fit_combiner(member_labels, target, table_weights, classes.size)
        progress.step()
        self.classes_ = classes
        self.estimators_ = fitted
        self.member_names_ = names
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations
        return self

    def _prefit_labels(
        self,
        fitted: list[Any],
        names: list[str],
        X: NDArray[np.float64],
        classes: NDArray[Any],
    ) -> NDArray[np.int64]:
        columns = []
        for member_name, estimator in zip(names, fitted, strict=True):
            check_is_fitted(estimator)
            columns.append(MemberLabels(classes, member_name)(estimator, X))
        return np.column_stack(columns)

    def _cross_fit(
        self,
        X: NDArray[np.float64],
        target: NDArray[np.int64],
        weights: NDArray[np.float64],
        classes: NDArray[Any],
        weighted: bool,
        callbacks: list[Callback] | None,
    ) -> tuple[list[Any], NDArray[np.int64], NDArray[np.float64], Progress]:
        """The members refitted on all rows, their out-of-fold labels (n_samples, L), the
        weights the combiner learns with (zero for rows no split held out), and the progress
        of the fit so far (one step left, for the combiner)."""
        names = [member_name for member_name, _ in self.estimators]
        prototypes = [estimator for _, estimator in self.estimators]
        if weighted:
            check_accepts_sample_weight(names, prototypes)
        splits = resolve_splits(
            self.cv,
            n_samples=X.shape[0],
            classes=target,
            weights=weights,
            random_state=self.random_state,
            partition=False,
        )
        outputs = [MemberLabels(classes, member_name) for member_name in names]
        # Members learn the user's labels (classes[code]), as prefit members would have.
        plan = FitPlan(prototypes, [0] * len(names), outputs, splits, target_labels=classes)
        progress = Progress(type(self).__name__, plan.n_fits + 1, callbacks)
        fitted, held_out = fit_members(
            plan,
            X,
            target[:, None],
            weights if weighted else None,
            n_jobs=self.n_jobs,
            progress=progress,
        )
        labels = np.column_stack([out for out in held_out if out is not None])
        held = splits.held_out
        table_weights = np.where(held, weights, 0.0)
        if table_weights.sum() <= 0:
            raise ValueError("The cv splits hold out no row of positive weight.")
        # Rows never held out (zero weight, or in no explicit test set) get the refitted
        # members' labels, which the combiner's tables weigh by zero.
        if not held.all():
            for member, output in enumerate(outputs):
                labels[~held, member] = output(fitted[member], X[~held])
        return fitted, labels, table_weights, progress

    def _fit_combiner(
        self,
        labels: NDArray[np.int64],
        target: NDArray[np.int64],
        weights: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        """Learn the combiner from out-of-fold labels (n_samples, L) and encoded targets."""
        raise NotImplementedError

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        """Class probabilities (n_samples, c) of label vectors (n_samples, L)."""
        raise NotImplementedError

    # -- predict -----------------------------------------------------------------------------

    def _member_labels(self, X: Any) -> NDArray[np.int64]:
        check_is_fitted(self)
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        columns = [
            MemberLabels(self.classes_, name)(estimator, X)
            for name, estimator in zip(self.member_names_, self.estimators_, strict=True)
        ]
        return np.column_stack(columns)

    def predict_members(self, X: Any) -> NDArray[Any]:
        """Every member's label for every row, shape (n_samples, n_members)."""
        labels = self._member_labels(X)
        return self.classes_[labels]

    def combine_labels(self, member_labels: Any) -> NDArray[np.float64]:
        """Class probabilities for given member labels (n_samples, n_members), as combined.

        Lets the combiner be inspected (or reused) on label vectors directly, without the
        members: ``predict_proba(X) == combine_labels(predict_members(X))``.
        """
        check_is_fitted(self)
        labels = np.asarray(member_labels)
        if labels.ndim != 2 or labels.shape[1] != len(self.estimators_):
            raise ValueError(
                f"member_labels must have shape (n_samples, {len(self.estimators_)}); "
                f"got {labels.shape}."
            )
        encoded = np.column_stack(
            [
                encode_member_labels(labels[:, i], self.classes_, name)
                for i, name in enumerate(self.member_names_)
            ]
        )
        return self._combine(encoded)

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities, shape (n_samples, n_classes), rows summing to one."""
        return self._combine(self._member_labels(X))

    def predict(self, X: Any) -> NDArray[Any]:
        """The most probable class (ties: the first in ``classes_``)."""
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import get_tags

        tags = super().__sklearn_tags__()
        members: Sequence[Any] = (
            [e for _, e in self.estimators] if self._members_are_valid() else []
        )
        # X reaches the members untouched: NaN is accepted when every member accepts it.
        tags.input_tags.allow_nan = all(get_tags(e).input_tags.allow_nan for e in members)
        return tags
