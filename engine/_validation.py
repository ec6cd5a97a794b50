"""Input checks shared by all estimators: arrays, targets, weights, seeds and fittedness.

The lowest of the engine's shared modules: :mod:`engine.base` and :mod:`engine.metrics` both
import it, and it imports neither (``NotFittedError`` and ``check_is_fitted`` live here for that
reason, as in scikit-learn's ``utils.validation``; :mod:`engine.base` re-exports them).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CompleteInputMixin",
    "DataConversionWarning",
    "NotFittedError",
    "check_X",
    "check_is_fitted",
    "check_sample_weight",
    "check_target",
    "resolve_seed_sequence",
    "spawn_seeds",
]


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute is needed before ``fit`` was called."""


def check_is_fitted(estimator: Any, attribute: str = "n_features_in_") -> None:
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. "
            "Call 'fit' with appropriate arguments before using this estimator."
        )


class DataConversionWarning(UserWarning):
    """The input was converted to the shape or type the estimator needs (e.g. a column y).

    Named like scikit-learn's warning of the same meaning, so tooling that reads warnings by
    name treats both alike.
    """


def check_X(
    X: Any,
    *,
    n_features: int | None = None,
    name: str = "X",
    estimator: str = "the estimator",
) -> NDArray[np.float64]:
    """Return ``X`` as a C-contiguous 2-D float64 array; NaN (missing) allowed, inf refused.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_features : int, optional
        When given (at predict time), the number of columns ``X`` must have.
    name : str
        What to call ``X`` in error messages.
    estimator : str
        What to call the estimator in error messages (its class name).
    """
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError(f"Sparse input is not supported; pass a dense array as {name}.")
    array = np.asarray(X)
    if np.iscomplexobj(array):
        raise ValueError("Complex data not supported.")
    if array.dtype.kind in "OUS":
        array = _as_numeric(array, name)
    if array.ndim != 2:
        raise ValueError(
            f"Expected a 2D array for {name}, got {array.ndim}D. Reshape your data with "
            "array.reshape(-1, 1) for a single feature or array.reshape(1, -1) for a single sample."
        )
    # The wording of these messages follows scikit-learn's, which its tooling matches.
    if array.shape[0] == 0:
        raise ValueError(
            f"{name} has 0 sample(s) (shape={array.shape}) while a minimum of 1 is required."
        )
    if array.shape[1] == 0:
        raise ValueError(
            f"{name} has 0 feature(s) (shape={array.shape}) while a minimum of 1 is required."
        )
    if n_features is not None and array.shape[1] != n_features:
        raise ValueError(
            f"{name} has {array.shape[1]} features, but {estimator} is expecting "
            f"{n_features} features as input."
        )
    array = np.ascontiguousarray(array, dtype=np.float64)
    if np.isinf(array).any():
        raise ValueError(f"{name} contains infinity; use NaN for missing values.")
    return array


def _as_numeric(array: NDArray[Any], name: str) -> NDArray[np.float64]:
    """Object or string arrays as float64: numeric strings convert, anything else is refused.

    Text that is not a number is a ValueError (bad values); objects that are neither strings
    nor numbers (dicts, lists) are a TypeError (bad types), as in NumPy itself.
    """
    try:
        return array.astype(np.float64)
    except ValueError:
        raise ValueError(
            f"{name} must be numeric; encode categorical columns as integer codes "
            "and pass their indices in categorical_features."
        ) from None
    except TypeError as exc:
        raise TypeError(f"{name} must be numeric: {exc}.") from None


def check_target(y: Any, n_samples: int, *, numeric: bool) -> NDArray[Any]:
    """Return ``y`` as a 1-D array of length ``n_samples``.

    Regression targets must be finite floats; classification labels may be any hashable
    scalars numpy can sort (ints, strings, bools), and floats only when they are integral
    (a continuous target given to a classifier is refused, not silently made into classes).
    A column vector of shape (n_samples, 1) is accepted with a :class:`DataConversionWarning`.
    """
    if y is None:
        raise ValueError("This estimator requires y to be passed, but the target y is None.")
    array = np.asarray(y)
    if array.ndim == 2 and array.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"y must be 1-dimensional; got shape {array.shape}.")
    if array.shape[0] != n_samples:
        raise ValueError(
            f"Found input variables with inconsistent numbers of samples: X has {n_samples} "
            f"rows, y has {array.shape[0]}."
        )
    if numeric:
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("A regression target y must be numeric.") from None
        if not np.isfinite(array).all():
            raise ValueError("y contains NaN or infinity; drop or impute those rows.")
    elif array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError("y contains NaN or infinity; class labels must be finite.")
    elif array.dtype.kind == "f" and (array != np.floor(array)).any():
        raise ValueError(
            "Unknown label type: 'continuous'. A classifier needs class labels (integers, "
            "strings or booleans); use a regressor for a continuous target."
        )
    elif array.dtype.kind == "O" and any(v is None for v in array):
        raise ValueError("y contains None; class labels must all be present.")
    return array


def check_sample_weight(sample_weight: Any, n_samples: int) -> NDArray[np.float64]:
    """Return non-negative float64 weights of length ``n_samples`` (ones when None)."""
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    if isinstance(sample_weight, numbers.Number):
        return np.full(n_samples, float(sample_weight))  # type: ignore[arg-type]
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.ndim != 1 or weights.shape[0] != n_samples:
        raise ValueError(f"sample_weight must have shape ({n_samples},); got {weights.shape}.")
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("sample_weight must be finite and non-negative.")
    if weights.sum() <= 0:
        raise ValueError("sample_weight sums to zero; at least one sample needs weight.")
    return np.ascontiguousarray(weights)


def unit_weights(n_samples: int) -> NDArray[np.float64]:
    """A weight of one for each of ``n_samples`` rows as a read-only view of a single number
    (stride 0): what a fit given no ``sample_weight`` reads, without 8 bytes a row (12 MiB
    of a 1.6 M-row boosting fit held through all its rounds). Products and sums with it give
    the values an array of ones gives, bit for bit; writing into it raises."""
    return np.broadcast_to(np.float64(1.0), (n_samples,))


def resolve_seed_sequence(random_state: Any) -> np.random.SeedSequence:
    """Resolve ``random_state`` once, into the root of all randomness of one ``fit``.

    An integer gives a reproducible root; None draws fresh entropy; a Generator contributes
    one draw, so passing the same Generator twice gives two different fits.
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(2**31)))
    return np.random.SeedSequence(int(random_state))


def spawn_seeds(root: np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds, spawned in the parent before any work is dispatched."""
    return root.spawn(n)


class CompleteInputMixin:
    """Input checks of estimators that cannot use missing values (NaN).

    ``check_X`` lets NaN through because trees route it; a linear model, a distance or a
    Gaussian density has no meaning for it, so these estimators refuse it with a clear error.
    """

    def _forget_fit(self) -> None:
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)  # a failed refit must not leave the previous model behind

    def _check_complete_X(self, X: Any, *, fitted: bool = False) -> NDArray[np.float64]:
        name = type(self).__name__
        n_features = None
        if fitted:
            check_is_fitted(self)
            n_features = self.n_features_in_  # type: ignore[attr-defined]
        array = check_X(X, n_features=n_features, estimator=name)
        if np.isnan(array).any():
            raise ValueError(
                f"{name} does not accept missing values (NaN); impute them or use a "
                "tree-based method."
            )
        return array

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.allow_nan = False
        return tags
