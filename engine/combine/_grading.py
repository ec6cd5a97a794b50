"""Grading (Seewald and Fürnkranz 2001): learn, per member, *where* it is right.

Stacking trains one combiner on the members' predictions. Grading keeps the original attributes
and changes the target: each member's out-of-fold predictions are *graded* (right or wrong),
and one meta-classifier per member — its grader — learns from the attributes whether that
member will be right. To predict, every member predicts, every
grader estimates the probability ``gᵢ(x)`` that its member is right, and the members graded
right (``gᵢ(x) > 1/2``) vote, each with weight ``gᵢ(x)``. When no member is graded right the vote
falls back to all members with equal weights.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, EstimatorValue, NoneValue
from engine.base import ClassifierMixin, clone
from engine.callbacks import Callback
from engine.combine._base import COMBINER_CONSTRAINTS, CV_CONSTRAINTS, BaseCombiner
from engine.combine._members import (
    FitPlan,
    MemberOutput,
    Progress,
    accepts_sample_weight,
    fit_members,
    member_output,
)
from engine.explain._background import background_sample
from engine.tree import DecisionTreeClassifier

__all__ = ["GradingClassifier"]

GRADED_RIGHT = 0.5  # a member takes part in the vote where its grader gives it more than this


class GradingClassifier(ClassifierMixin, BaseCombiner):
    """Vote of the members that per-member graders expect to be right on each row.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        The members (base classifiers); an estimator may be ``"drop"``.
    grader : classifier or None
        The meta-classifier cloned for every member, fitted on the original features to
        predict whether that member's out-of-fold prediction is right (label 1) or wrong (0);
        it needs ``predict_proba``. None means ``DecisionTreeClassifier(min_samples_leaf=5,
        random_state=0)``: a tree routes missing values and needs no scaling, and leaves of at
        least five rows give graded probabilities rather than bare 0/1 votes.
    cv : int or sequence of (train_rows, test_rows) pairs
        Stratified folds for the out-of-fold predictions, or explicit splits (as in
        :class:`StackingClassifier`).
    n_jobs : int or None
        Worker processes for the member × fold fits and for the graders.
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    estimators_ : list
        The members refitted on all rows.
    graders_ : list
        One fitted grader per member.
    named_estimators_ : dict of str to estimator
    member_names_ : list of str
    oof_accuracies_ : ndarray of shape (n_members,)
        Each member's out-of-fold accuracy (the share of its graded rows that are right).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    """

    _classification = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **COMBINER_CONSTRAINTS,
        **CV_CONSTRAINTS,
        "grader": [EstimatorValue(), NoneValue()],
    }

    graders_: list[Any]
    oof_accuracies_: NDArray[np.float64]

    def __init__(
        self,
        estimators: Any,
        grader: Any = None,
        *,
        cv: int = 5,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.grader = grader
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _grader_prototype(self) -> Any:
        if self.grader is None:
            return DecisionTreeClassifier(min_samples_leaf=5, random_state=0)
        return self.grader

    def _nested_estimators(self) -> list[Any]:
        return [*super()._nested_estimators(), self._grader_prototype()]

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> GradingClassifier:
        """Fit members fold by fold and on all rows, then one grader per member.

        ``sample_weight`` goes to every fit. One progress event per fit: members × (cv + 1),
        then one per grader.
        """
        self._validate_params()
        self._forget_fit()
        names, prototypes, _ = self._active_members()
        grader = clone(self._grader_prototype())
        if not hasattr(grader, "predict_proba"):
            raise ValueError(f"The grader {grader!r} needs predict_proba.")
        if sample_weight is not None and not accepts_sample_weight(grader):
            raise TypeError(f"The grader {grader!r} does not accept sample_weight.")
        X, target, weights, classes = self._fit_input(X, y, sample_weight, names, prototypes)
        n_members, n_jobs = len(prototypes), self.n_jobs
        outputs = [MemberOutput("predict", classes.size)] * n_members
        plan = FitPlan(prototypes, [0] * n_members, outputs, self._splits(target))
        progress = Progress(type(self).__name__, plan.n_fits + n_members, callbacks)
        members, held_out = fit_members(
            plan, X, target[:, None], weights, n_jobs=n_jobs, progress=progress
        )
        graded = np.column_stack(
            [out[:, 0].astype(np.int64) == target for out in held_out if out is not None]
        ).astype(np.int64)
        grader_plan = FitPlan([grader] * n_members, range(n_members), [None] * n_members, None)
        graders, _ = fit_members(grader_plan, X, graded, weights, n_jobs=n_jobs, progress=progress)
        self.oof_accuracies_ = np.average(graded, axis=0, weights=weights)
        self.classes_ = classes
        self.estimators_ = members
        self.graders_ = graders
        self.member_names_ = names
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations
        return self

    def _grades(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        grades = np.zeros((X.shape[0], len(self.graders_)))
        for i, grader in enumerate(self.graders_):
            right = np.flatnonzero(np.asarray(grader.classes_) == 1)
            if right.size:  # a grader that only ever saw "wrong" gives 0
                grades[:, i] = grader.predict_proba(X)[:, right[0]]
        return grades

    def predict_grades(self, X: Any) -> NDArray[np.float64]:
        """Each grader's probability that its member is right, shape (n_samples, n_members)."""
        return self._grades(self._check_X(X))

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Vote shares of the members graded right (of all members where none is).

        Returns
        -------
        ndarray of shape (n_samples, n_classes), rows summing to one.
        """
        X = self._check_X(X)
        grades = self._grades(X)
        weights = np.where(grades > GRADED_RIGHT, grades, 0.0)
        weights[~(grades > GRADED_RIGHT).any(axis=1)] = 1.0  # nobody graded right: all vote
        votes = np.zeros((X.shape[0], self.classes_.size))
        rows = np.arange(X.shape[0])
        for i, member in enumerate(self.estimators_):
            predicted = member_output(member, X, "predict", self.classes_.size)[:, 0]
            votes[rows, predicted.astype(np.int64)] += weights[:, i]
        return votes / votes.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> NDArray[Any]:
        """The class with the largest vote (ties: the first in ``classes_``), (n_samples,)."""
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]
