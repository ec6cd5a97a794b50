"""A scikit-learn estimator whose fitting and predicting happen on a Coppice server.

It keeps scikit-learn's contract without importing scikit-learn (as the engine does):
``__init__`` only stores its arguments, ``get_params``/``set_params`` read and write them,
and everything ``fit`` learns ends in ``_``, so ``clone`` gives an unfitted copy. ``clone``
deep-copies every argument; a :class:`~coppice.client.Client` deep-copies as its URL and key,
so the copy shares no connection pool, locks or sockets with the original.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np

from coppice.client import Client
from coppice.models import Model

TARGET_COLUMN = "__target__"


class NotFittedError(ValueError, AttributeError):
    """Predicting before ``fit``; the same bases as scikit-learn's own, so its checks pass."""


class RemoteEstimator:
    """Train ``method`` with ``params`` on the server; predict with the model it made.

    Parameters
    ----------
    client : Client, optional
        The server; ``None`` means ``Client()`` (``COPPICE_URL``, ``COPPICE_API_KEY``).
    method : str
        A method name of ``GET /v1/methods`` (``random_forest``, ``xgboost``, ...).
    params : dict, optional
        The method's hyperparameters.
    task : {"classification", "regression"}, optional
        Inferred from ``y`` when left out: numbers with a fractional part, or more than
        half as many distinct values as rows, mean regression.
    validation : dict, optional
        The job's validation; ``{"holdout": 0}`` (every row trains) when left out, since
        scikit-learn's own tools do the validating.
    seed : int, optional
        The job's seed (the estimator's ``random_state`` on the server).
    progress : bool
        Show the job's progress while ``fit`` waits.
    """

    def __init__(
        self,
        client: Client | None = None,
        method: str = "random_forest",
        params: dict[str, Any] | None = None,
        task: str | None = None,
        validation: dict[str, Any] | None = None,
        seed: int | None = None,
        progress: bool = False,
    ) -> None:
        self.client = client
        self.method = method
        self.params = params
        self.task = task
        self.validation = validation
        self.seed = seed
        self.progress = progress

    # scikit-learn's parameter protocol

    @classmethod
    def _get_param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [name for name in signature.parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> RemoteEstimator:
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(method={self.method!r}, params={self.params!r})"

    @property
    def _estimator_type(self) -> str | None:
        # scikit-learn reads this (and __sklearn_tags__) to choose stratified folds and a
        # default scorer; before fit it is only known when ``task`` was given.
        task = getattr(self, "task_", None) or self.task
        return {"classification": "classifier", "regression": "regressor"}.get(task or "")

    def __sklearn_tags__(self) -> Any:
        # Only scikit-learn's own tooling calls this, so importing it here adds no dependency.
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        tags = Tags(estimator_type=self._estimator_type, target_tags=TargetTags(required=True))
        tags.input_tags.allow_nan = True
        tags.non_deterministic = self.seed is None
        if tags.estimator_type == "classifier":
            tags.classifier_tags = ClassifierTags()
        elif tags.estimator_type == "regressor":
            tags.regressor_tags = RegressorTags()
        return tags

    # Fitting

    def fit(self, X: Any, y: Any) -> RemoteEstimator:
        """Upload ``X`` with ``y``, train on the server, wait for the model."""
        client = self.client if self.client is not None else Client()
        features = _feature_names(X)
        target = np.asarray(y)
        if target.ndim != 1 or len(target) != _n_rows(X):
            raise ValueError(f"y must be 1-D with one value per row of X; got {target.shape}")
        task = self.task or _infer_task(target)
        table, categorical = _table(X, features)
        if task == "classification":
            self.classes_ = np.unique(target)
            table[TARGET_COLUMN] = np.asarray([_label_text(v) for v in target], dtype=object)
            categorical.append(TARGET_COLUMN)
        else:
            table[TARGET_COLUMN] = target.astype(float)
        dataset = client.upload(
            _object_matrix(table, len(target)),
            columns=list(table),
            categorical=categorical,
            name=f"{type(self).__name__} {self.method}",
        )
        job = client.train(
            dataset,
            target=TARGET_COLUMN,
            method=self.method,
            params=self.params,
            task=task,
            validation=self.validation if self.validation is not None else {"holdout": 0},
            seed=self.seed,
        )
        model = job.wait(progress=self.progress)
        self.task_ = task
        self.dataset_id_ = dataset.id
        self.job_id_ = job.id
        self.model_id_ = model.id
        self.n_features_in_ = len(features)
        if _is_dataframe(X):
            self.feature_names_in_ = np.asarray(features, dtype=object)
        self._model = model
        return self

    @property
    def model_(self) -> Model:
        """The fitted model on the server."""
        self._check_fitted()
        return self._model

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_id_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    # Predicting

    def _rows(self, X: Any) -> np.ndarray:
        self._check_fitted()
        features = list(self._model.features)
        if not _is_dataframe(X):
            array = np.asarray(X)
            if array.dtype.kind in "iuf" and array.ndim == 2 and array.shape[1] == len(features):
                # Plain numbers go as they are (NaN sent as null), without a per-cell pass.
                return array.astype(float, copy=False)
        table, _ = _table(X, features)
        return _object_matrix(table, _n_rows(X))

    def predict(self, X: Any) -> np.ndarray:
        predicted = self._model_checked().predict(self._rows(X))
        if self.task_ == "regression":
            return np.asarray(predicted, dtype=float)
        by_text = {_label_text(label): label for label in self.classes_}
        return np.asarray([by_text[text] for text in predicted], dtype=self.classes_.dtype)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities with columns in ``classes_`` order (the server sorts as text)."""
        model = self._model_checked()
        if self.task_ != "classification":
            raise AttributeError("predict_proba is for classification")
        probabilities = np.asarray(model.predict_proba(self._rows(X)), dtype=float)
        server_order = {text: j for j, text in enumerate(model.classes or [])}
        return probabilities[:, [server_order[_label_text(c)] for c in self.classes_]]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (classification) or R² (regression), as scikit-learn's mixins score."""
        predicted = self.predict(X)
        truth = np.asarray(y)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
        if self.task_ == "classification":
            return float(np.average(predicted == truth, weights=weights))
        truth = truth.astype(float)
        mean = np.average(truth, weights=weights)
        residual = float(np.average((truth - predicted) ** 2, weights=weights))
        total = float(np.average((truth - mean) ** 2, weights=weights))
        return 1.0 - residual / total if total > 0 else 0.0

    def _model_checked(self) -> Model:
        self._check_fitted()
        return self._model


def _is_dataframe(X: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(X, pandas.DataFrame)


def _n_rows(X: Any) -> int:
    return len(X) if _is_dataframe(X) else int(np.asarray(X).shape[0])


def _feature_names(X: Any) -> list[str]:
    if _is_dataframe(X):
        return [str(column) for column in X.columns]
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"X must be 2-D; got shape {array.shape}")
    return [f"x{j}" for j in range(array.shape[1])]


def _table(X: Any, features: list[str]) -> tuple[dict[str, np.ndarray], list[str]]:
    """``X``'s columns by name, and those that hold categories rather than numbers."""
    if _is_dataframe(X):
        by_name = {str(name): name for name in X.columns}
        missing = [name for name in features if name not in by_name]
        if missing:
            raise ValueError(f"X lacks the feature(s) the model was fitted on: {missing}")
        columns = {name: X[by_name[name]].to_numpy() for name in features}
    else:
        array = np.asarray(X)
        if array.ndim != 2 or array.shape[1] != len(features):
            raise ValueError(f"X must have {len(features)} columns; got shape {array.shape}")
        columns = {name: array[:, j] for j, name in enumerate(features)}
    categorical = [name for name, column in columns.items() if column.dtype.kind not in "iuf"]
    return columns, categorical


def _object_matrix(table: dict[str, np.ndarray], n_rows: int) -> np.ndarray:
    """The columns side by side, each cell keeping its own type (numbers, text)."""
    matrix = np.empty((n_rows, len(table)), dtype=object)
    for j, column in enumerate(table.values()):
        matrix[:, j] = column
    return matrix


def _label_text(label: Any) -> str:
    """A class label as the dataset holds it: the text the CSV carried."""
    return str(label.item() if isinstance(label, np.generic) else label)


def _infer_task(y: np.ndarray) -> str:
    if y.dtype.kind not in "iuf":
        return "classification"
    values = y.astype(float)
    fractional = bool(np.any(values != np.round(values)))
    many = len(np.unique(values)) > len(values) / 2
    return "regression" if fractional or many else "classification"
