"""What every label-fusion combiner shares: members, out-of-fold labels, and the predict path.

A fusion combiner (seed 003: every member "is supposed to have knowledge of the whole feature
space") sees each member only through its crisp label ``s_i = D_i(x)``. It learns how to map
the label vector ``s = (s_1, …, s_L)`` to a class from labels the members gave to rows they
were *not* fitted on: the rows are dealt into ``cv`` stratified folds, each member is fitted on
``cv − 1`` folds and labels the held-out one, and afterwards every member is refitted on all
rows (Kuncheva, *Combining Pattern Classifiers*, ch. 4, trains the combiner on data the members
did not see; cross-validation uses every row for both). With ``prefit=True`` the members are
used as given and the combiner is fitted on their labels of the rows passed to ``fit``.
Rows of zero weight take no fold (see :mod:`engine.fusion._splits`), so zero weight means
"not there" for the members, the folds and the combiner's tables alike.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    Boolean,
    Constraint,
    EstimatorValue,
    Interval,
    NoneValue,
    RandomStateValue,
)
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X
from engine.base import BaseEstimator, ClassifierMixin, check_is_fitted, clone
from engine.callbacks import Callback, ProgressEvent, notify
from engine.fusion._splits import CVSplits, resolve_splits
from engine.fusion._tables import encode_member_labels
from engine.parallel import SharedData, make_executor

__all__ = ["FUSION_CONSTRAINTS", "BaseLabelCombiner", "NamedClassifiers"]

_FIT_ON_ALL_ROWS = -1  # the task's split number for a refit on every row


@dataclass(frozen=True)
class NamedClassifiers(Constraint):
    """A non-empty list of ``(name, classifier)`` pairs with distinct names."""

    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or not value:
            return False
        pairs_ok = all(
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and EstimatorValue().is_satisfied_by(pair[1])
            for pair in value
        )
        return pairs_ok and len({pair[0] for pair in value}) == len(value)

    def describe(self) -> str:
        return "a non-empty list of (name, estimator) pairs with distinct names"

    def json_schema(self) -> dict[str, Any]:
        pair = {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/learner"}],
            "minItems": 2,
            "maxItems": 2,
        }
        return {"type": "array", "items": pair, "minItems": 1}


FUSION_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimators": [NamedClassifiers()],
    "cv": [Interval("int", 2, None), CVSplits()],
    "prefit": [Boolean()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
    "random_state": [RandomStateValue()],
}


# --- fitting the members -------------------------------------------------------------------------


def _accepts_sample_weight(estimator: Any) -> bool:
    return "sample_weight" in inspect.signature(estimator.fit).parameters


@dataclass(frozen=True)
class _MemberFit:
    name: str
    estimator: Any  # unfitted prototype, cloned in the worker
    split: int  # index of the split whose training rows it is fitted on, or _FIT_ON_ALL_ROWS
    classes: NDArray[Any]  # label values: members learn the user's labels, not codes
    weighted: bool


def _fit_member(shared: SharedData, task: _MemberFit) -> Any:
    """Fit one member (runs in a worker): the refitted member, or its held-out labels."""
    X, target = shared["X"], shared["target"]
    rows = slice(None) if task.split == _FIT_ON_ALL_ROWS else shared["train"][task.split]
    estimator = clone(task.estimator)
    extra = {"sample_weight": shared["sample_weight"][rows]} if task.weighted else {}
    estimator.fit(X[rows], task.classes[target[rows]], **extra)
    if task.split == _FIT_ON_ALL_ROWS:
        return estimator
    held_out = shared["test"][task.split]
    return encode_member_labels(estimator.predict(X[held_out]), task.classes, task.name)


class BaseLabelCombiner(ClassifierMixin, BaseEstimator):
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

    # -- parameters: members are reachable as ``name`` and ``name__param`` ------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        if deep and NamedClassifiers().is_satisfied_by(self.estimators):
            own = set(self._get_param_names())
            for name, estimator in self.estimators:
                if name in own:
                    continue  # refused by fit; never let a member hide a parameter
                params[name] = estimator
                for key, value in estimator.get_params(deep=True).items():
                    params[f"{name}__{key}"] = value
        return params

    def set_params(self, **params: Any) -> BaseLabelCombiner:
        if "estimators" in params:
            self.estimators = params.pop("estimators")
        valid = NamedClassifiers().is_satisfied_by(self.estimators)
        names = {name for name, _ in self.estimators} if valid else set()
        own: dict[str, Any] = {}
        for key, value in params.items():
            name, _, sub_key = key.partition("__")
            if name not in names or name in self._get_param_names():
                own[key] = value
            elif sub_key:
                dict(self.estimators)[name].set_params(**{sub_key: value})
            else:
                self.estimators = [(n, value if n == name else e) for n, e in self.estimators]
        super().set_params(**own)
        return self

    @property
    def named_estimators_(self) -> dict[str, Any]:
        """The fitted members by name."""
        check_is_fitted(self)
        return dict(zip(self.member_names_, self.estimators_, strict=True))

    # -- fit ---------------------------------------------------------------------------------

    def _forget_fit(self) -> None:
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)  # a failed refit must not leave the previous model behind

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
        for member_name in names:
            if "__" in member_name or member_name in self._get_param_names():
                raise ValueError(
                    f"Member name {member_name!r} must not contain '__' nor be a parameter "
                    f"name of {name}."
                )
        if self.prefit:
            fitted = [estimator for _, estimator in self.estimators]
            member_labels = self._prefit_labels(fitted, names, X, classes)
            table_weights, total = weights, 1
        else:
            weighted = sample_weight is not None
            fitted, member_labels, table_weights = self._cross_fit(
                X, target, weights, classes, weighted, callbacks
            )
            total = len(names) * (self._n_splits() + 1) + 1
        self._fit_combiner(member_labels, target, table_weights, classes.size)
        notify(callbacks, ProgressEvent(name, total, total))
        self.classes_ = classes
        self.estimators_ = fitted
        self.member_names_ = names
        self.n_features_in_ = X.shape[1]
        return self

    def _n_splits(self) -> int:
        return int(self.cv) if isinstance(self.cv, numbers.Integral) else len(self.cv)

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
            columns.append(encode_member_labels(estimator.predict(X), classes, member_name))
        return np.column_stack(columns)

    def _cross_fit(
        self,
        X: NDArray[np.float64],
        target: NDArray[np.int64],
        weights: NDArray[np.float64],
        classes: NDArray[Any],
        weighted: bool,
        callbacks: list[Callback] | None,
    ) -> tuple[list[Any], NDArray[np.int64], NDArray[np.float64]]:
        """The members refitted on all rows, their out-of-fold labels (n_samples, L), and
        the weights the combiner learns with (zero for rows no split held out)."""
        if weighted:
            for member_name, estimator in self.estimators:
                if not _accepts_sample_weight(estimator):
                    raise TypeError(
                        f"Member {member_name!r} ({type(estimator).__name__}) does not accept "
                        "sample_weight."
                    )
        train, test = resolve_splits(self.cv, target, weights, self.random_state)
        tasks = [
            _MemberFit(member_name, estimator, split, classes, weighted)
            for member_name, estimator in self.estimators
            for split in [*range(train.shape[0]), _FIT_ON_ALL_ROWS]
        ]
        shared = {
            "X": X,
            "target": target,
            "sample_weight": weights,
            "train": train,
            "test": test,
        }
        labels = np.zeros((X.shape[0], len(self.estimators)), dtype=np.int64)
        fitted: list[Any] = []
        name, total = type(self).__name__, len(tasks) + 1
        with make_executor(shared, self.n_jobs, len(tasks)) as executor:
            results = executor.map(_fit_member, tasks)
            for done, (task, result) in enumerate(zip(tasks, results, strict=True), start=1):
                if task.split == _FIT_ON_ALL_ROWS:
                    fitted.append(result)
                else:
                    labels[test[task.split], len(fitted)] = result
                notify(callbacks, ProgressEvent(name, done, total))
        held_out = test.any(axis=0)
        table_weights = np.where(held_out, weights, 0.0)
        if table_weights.sum() <= 0:
            raise ValueError("The cv splits hold out no row of positive weight.")
        # Rows never held out (zero weight, or in no explicit test set) get the refitted
        # members' labels, which the combiner's tables weigh by zero.
        if not held_out.all():
            for member, (member_name, _) in enumerate(self.estimators):
                labels[~held_out, member] = encode_member_labels(
                    fitted[member].predict(X[~held_out]), classes, member_name
                )
        return fitted, labels, table_weights

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
            encode_member_labels(estimator.predict(X), self.classes_, name)
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
            [e for _, e in self.estimators]
            if NamedClassifiers().is_satisfied_by(self.estimators)
            else []
        )
        # X reaches the members untouched: NaN is accepted when every member accepts it.
        tags.input_tags.allow_nan = all(get_tags(e).input_tags.allow_nan for e in members)
        return tags
