"""Stacking: a final estimator learns to combine the members' held-out outputs (Wolpert 1992).

The members' outputs are the final estimator's features, and they must come from rows the
members were not fitted on: outputs on their own training rows would favour the members that
fit (or overfit) the training data best (Wolpert 1992; Breiman 1996, "Stacked regressions";
Ting and Witten 1999 for class probabilities as the outputs). So the meta-features of every
training row are the *out-of-fold* outputs of the members (``cv`` folds, stratified for
classification, shuffled by ``random_state``); the final estimator is fitted on them (plus the
original features with ``passthrough``), and the members are then refitted on all rows to
produce the meta-features of new data.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, EstimatorValue, NoneValue, Options
from engine.base import ClassifierMixin, RegressorMixin, clone
from engine.callbacks import Callback
from engine.combine._base import (
    COMBINER_CONSTRAINTS,
    CV_CONSTRAINTS,
    BaseCombiner,
    TransformMixin,
)
from engine.combine._members import (
    OUTPUT_METHODS,
    FitPlan,
    MemberOutput,
    Progress,
    accepts_sample_weight,
    fit_members,
    member_output,
)
from engine.explain._background import background_sample
from engine.linear import LogisticRegression, Ridge

__all__ = ["StackingClassifier", "StackingRegressor"]

STACKING_CONSTRAINTS: dict[str, list[Constraint]] = {
    **COMBINER_CONSTRAINTS,
    **CV_CONSTRAINTS,
    "final_estimator": [EstimatorValue(), NoneValue()],
    "passthrough": [Boolean()],
}


class _BaseStacking(TransformMixin, BaseCombiner):
    final_estimator: Any
    cv: int
    passthrough: bool
    random_state: Any

    final_estimator_: Any
    stack_method_: list[str]

    def _default_final_estimator(self) -> Any:
        raise NotImplementedError

    def _stack_method(self, name: str, prototype: Any) -> str:
        return "predict"

    def _nested_estimators(self) -> list[Any]:
        final = self.final_estimator
        if final is None:
            final = self._default_final_estimator()
        return super()._nested_estimators() + ([final] if self.passthrough else [])

    def _fit_stacking(
        self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None
    ) -> None:
        self._validate_params()
        self._forget_fit()
        names, prototypes, _ = self._active_members()
        methods = [self._stack_method(n, p) for n, p in zip(names, prototypes, strict=True)]
        final = clone(
            self._default_final_estimator()
            if self.final_estimator is None
            else self.final_estimator
        )
        if sample_weight is not None and not accepts_sample_weight(final):
            raise TypeError(f"The final estimator {final!r} does not accept sample_weight.")
        X, target, weights, classes = self._fit_input(X, y, sample_weight, names, prototypes)
        n_classes = classes.size
        outputs = [MemberOutput(method, n_classes) for method in methods]
        plan = FitPlan(prototypes, [0] * len(prototypes), outputs, self._splits(target))
        progress = Progress(type(self).__name__, plan.n_fits + 1, callbacks)
        fitted, held_out = fit_members(
            plan, X, target[:, None], weights, n_jobs=self.n_jobs, progress=progress
        )
        meta = self._stack([out for out in held_out if out is not None], methods, X, n_classes)
        final.fit(meta, target, **({} if weights is None else {"sample_weight": weights}))
        progress.step()
        if self._classification:
            self.classes_ = classes
        self.estimators_ = fitted
        self.member_names_ = names
        self.stack_method_ = methods
        self.final_estimator_ = final
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations

    def _stack(
        self,
        outputs: list[NDArray[np.float64]],
        methods: list[str],
        X: NDArray[np.float64],
        n_classes: int,
    ) -> NDArray[np.float64]:
        """Meta-features: member outputs side by side, then ``X`` with ``passthrough``.

        With two classes the first probability column of each member is dropped: the two
        columns sum to one, and the collinear pair would only destabilise the final fit.
        """
        columns = [
            out[:, 1:] if method == "predict_proba" and n_classes == 2 else out
            for out, method in zip(outputs, methods, strict=True)
        ]
        if self.passthrough:
            columns.append(X)
        return np.hstack(columns)

    def transform(self, X: Any) -> NDArray[np.float64]:
        """Meta-features of ``X`` from the refitted members, shape (n_samples, n_meta)."""
        X = self._check_X(X)
        n_classes = self.classes_.size if self._classification else 0
        outputs = [
            member_output(est, X, method, n_classes)
            for est, method in zip(self.estimators_, self.stack_method_, strict=True)
        ]
        return self._stack(outputs, self.stack_method_, X, n_classes)


class StackingClassifier(ClassifierMixin, _BaseStacking):
    """A final classifier fitted on the members' out-of-fold outputs.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        The members; an estimator may be ``"drop"``. Fitted on encoded labels.
    final_estimator : estimator or None
        Combines the meta-features; None means ``LogisticRegression()``.
    cv : int or sequence of (train_rows, test_rows) pairs
        Number of stratified folds for the out-of-fold outputs (at least 2), or explicit
        splits whose test sets partition the rows (each training set = the other rows).
    stack_method : {"auto", "predict_proba", "decision_function", "predict"}
        The member output used as meta-features. ``"auto"`` takes, per member, the first of
        ``predict_proba``, ``decision_function``, ``predict`` it has. Probabilities give one
        column per class, except with two classes, where the first column is dropped;
        ``predict`` gives the class code (0 … n_classes − 1).
    passthrough : bool
        Append the original features to the meta-features.
    n_jobs : int or None
        Worker processes for the member × fold fits.
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    estimators_ : list
        The members refitted on all rows (those not dropped).
    named_estimators_ : dict of str to estimator
    member_names_ : list of str
    stack_method_ : list of str
        The output each member contributes.
    final_estimator_ : estimator
        Fitted on the out-of-fold meta-features.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    """

    _classification = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **STACKING_CONSTRAINTS,
        "stack_method": [Options(("auto", *OUTPUT_METHODS))],
    }

    def __init__(
        self,
        estimators: Any,
        final_estimator: Any = None,
        *,
        cv: int = 5,
        stack_method: str = "auto",
        passthrough: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.final_estimator = final_estimator
        self.cv = cv
        self.stack_method = stack_method
        self.passthrough = passthrough
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _default_final_estimator(self) -> Any:
        return LogisticRegression()

    def _stack_method(self, name: str, prototype: Any) -> str:
        wanted = OUTPUT_METHODS if self.stack_method == "auto" else (self.stack_method,)
        for method in wanted:
            if hasattr(prototype, method):
                return method
        raise ValueError(
            f"Member {name!r} ({type(prototype).__name__}) has no {' or '.join(wanted)}."
        )

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> StackingClassifier:
        """Fit members fold by fold and on all rows, then the final estimator.

        ``sample_weight`` goes to every fit (members on their training folds, and the final
        estimator). One progress event per fit: members × (cv + 1), then the final estimator.
        """
        self._fit_stacking(X, y, sample_weight, callbacks)
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """The final estimator's probabilities, shape (n_samples, n_classes)."""
        meta = self.transform(X)
        return member_output(self.final_estimator_, meta, "predict_proba", self.classes_.size)

    def predict(self, X: Any) -> NDArray[Any]:
        """The final estimator's predicted labels, shape (n_samples,)."""
        meta = self.transform(X)
        codes = np.asarray(self.final_estimator_.predict(meta))
        return self.classes_[codes.astype(np.int64)]


class StackingRegressor(RegressorMixin, _BaseStacking):
    """A final regressor fitted on the members' out-of-fold predictions.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
    final_estimator : estimator or None
        None means ``Ridge()``.
    cv : int or sequence of (train_rows, test_rows) pairs
        Number of (shuffled, unstratified) folds, or explicit splits.
    passthrough, n_jobs, random_state :
        As in :class:`StackingClassifier`.

    Attributes
    ----------
    estimators_, named_estimators_, member_names_, final_estimator_, n_features_in_ :
        As in :class:`StackingClassifier`; ``stack_method_`` is ``"predict"`` throughout.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = STACKING_CONSTRAINTS

    def __init__(
        self,
        estimators: Any,
        final_estimator: Any = None,
        *,
        cv: int = 5,
        passthrough: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.final_estimator = final_estimator
        self.cv = cv
        self.passthrough = passthrough
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _default_final_estimator(self) -> Any:
        return Ridge()

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> StackingRegressor:
        """As :meth:`StackingClassifier.fit`, with unstratified folds."""
        self._fit_stacking(X, y, sample_weight, callbacks)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """The final estimator's prediction, shape (n_samples,)."""
        meta = self.transform(X)
        return np.asarray(self.final_estimator_.predict(meta), dtype=np.float64)
