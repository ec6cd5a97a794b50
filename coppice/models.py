"""A fitted model on the server: predictions, explanations, importances, metrics, curves,
and the validation rows' ROC curves or residuals."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from coppice._json import JSON_HEADERS, json_bytes
from coppice._resource import Resource
from coppice._rows import Rows, predictions_out, rows_of, table_out

if TYPE_CHECKING:
    from collections.abc import Sequence

    from coppice.batch import BatchPrediction
    from coppice.client import Client
    from coppice.datasets import Dataset
    from coppice.registry import ModelVersion


@dataclass(frozen=True)
class Explanation:
    """Per-row additive contributions to the model's explained output, as the server computed
    them: exact (TreeSHAP, linear terms, ...) or sampled Shapley values, as ``method`` says.

    ``contributions`` is ``(n_rows, n_features)`` (a DataFrame for DataFrame input), or
    ``(n_rows, n_features, n_classes)`` for multiclass models; with ``bias``, each row's
    contributions sum to the explained output (docs/api.md says which output each method
    explains).
    """

    predictions: Any
    contributions: Any
    bias: Any
    features: list[str]
    classes: list[str] | None
    method: str = "exact"  # "exact" or "sampled"

    def plot(self, row: int = 0, *, output: int = 0, top: int = 20, ax: Any = None) -> Any:
        """Bars of one row's contributions, largest magnitude at the top (matplotlib).
        ``output`` picks the class of a multiclass model's contributions."""
        from coppice.plots import plot_contributions

        values = np.asarray(self.contributions, dtype=float)[row]
        if values.ndim == 2:
            values = values[:, output]
        bias = np.asarray(self.bias, dtype=float).reshape(-1)
        return plot_contributions(
            self.features,
            values,
            float(bias[min(output, bias.size - 1)]),
            title=f"row {row}: {self.method} contributions",
            top=top,
            ax=ax,
        )


class Model(Resource):
    """One model, as ``GET /v1/models/{id}`` describes it; read-only, like the model itself.

    A model fetched through a registered name (``client.model("churn@production")``) knows
    the reference it was asked by (:attr:`ref`) and the version it resolved to
    (:attr:`registered_version`); its calls go to that model by id, so they keep answering
    from it even after the alias moves.
    """

    collection = "models"

    def __init__(
        self,
        client: Client,
        info: dict[str, Any],
        *,
        ref: str | None = None,
        registered_version: ModelVersion | None = None,
    ) -> None:
        super().__init__(client, info)
        self.ref = ref
        self.registered_version = registered_version
        self._curves: dict[str, Any] | None = None
        self._diagnostics: dict[str, Any] | None = None
        self._asked_kinds = False

    def __repr__(self) -> str:
        registered = ""
        if self.registered_version is not None:
            registered = f" {self.registered_version.ref}"
            if self.ref and self.ref != self.registered_version.ref:
                registered += f" ({self.ref})"
        return f"<Model {self.id}{registered} {self.method} {self.task} target={self.target!r}>"

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @property
    def name(self) -> str | None:
        """The name given to its training job (not a registered name: see
        :attr:`registered_name`)."""
        return self.info.get("name")

    @property
    def registered_name(self) -> str | None:
        """The registered name it was fetched through (``churn`` of ``churn@production``)."""
        return None if self.registered_version is None else self.registered_version.name

    @property
    def version(self) -> int | None:
        """The version of :attr:`registered_name` it is (``None``: not fetched by a name)."""
        return None if self.registered_version is None else self.registered_version.version

    @property
    def registered(self) -> list[tuple[str, int]]:
        """Every registered ``(name, version)`` this model is, however it was fetched (by id
        too), as the server last said; empty when it is none (or the server predates it)."""
        return [(str(r["name"]), int(r["version"])) for r in self.info.get("registered") or ()]

    @property
    def method(self) -> str:
        return str(self.info["method"])

    @property
    def task(self) -> str:
        return str(self.info["task"])

    @property
    def target(self) -> str:
        return str(self.info["target"])

    @property
    def features(self) -> list[str]:
        return [str(feature["name"]) for feature in self.info["features"]]

    @property
    def classes(self) -> list[str] | None:
        return self.info.get("classes")

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.info.get("params") or {})

    @property
    def metrics(self) -> dict[str, Any]:
        """``{"train", "validation", "oob", "cv"}``, each ``None`` when it does not apply."""
        return dict(self.info.get("metrics") or {})

    @property
    def curves(self) -> dict[str, Any]:
        """The learning curves (``iterations``, ``train``, ``validation``, ``oob``, ``metric``).

        Raises :class:`~coppice.errors.NotFoundError` for a model without curves.
        """
        if self._curves is None:
            self._curves = self._get(f"{self.path}/curves")
        return self._curves

    @property
    def importance_kinds(self) -> list[str] | None:
        """The kinds :meth:`feature_importance` takes for this model (``impurity``,
        ``permutation``, ``shap``, ...), in the API's order; ``[]`` when it has none.

        As the server described the model; a model from a listing that does not say (one
        trained before the server kept them) reads the model once to ask. ``None`` when the
        server cannot tell (an unreadable artifact, or a server older than the field).
        """
        kinds = self.info.get("importance_kinds")
        if kinds is None and not self._asked_kinds:
            self._asked_kinds = True
            kinds = self._get(self.path).get("importance_kinds")
            self.info = {**self.info, "importance_kinds": kinds}
        return None if kinds is None else [str(kind) for kind in kinds]

    @property
    def diagnostics(self) -> dict[str, Any]:
        """The points behind the validation metrics, kept at training on the holdout rows:
        ``{"model_id", "validation_rows", "roc", "residuals"}``.

        ``roc`` (classifiers) maps a class label to ``{"fpr", "tpr", "auc"}`` (binary: the
        second class only); ``residuals`` (regressors) is ``{"predicted", "actual"}`` of at
        most 500 rows. What the model lacks is ``None`` (all of it without a holdout).
        """
        if self._diagnostics is None:
            self._diagnostics = self._get(f"{self.path}/diagnostics")
        return self._diagnostics

    def _predict(self, data: Any, **options: Any) -> tuple[Rows, dict[str, Any]]:
        rows = rows_of(data, self.features)
        answer = self._post(
            f"{self.path}/predict",
            content=json_bytes(rows.body | options),
            headers=JSON_HEADERS,
            # A prediction changes nothing on the server, so repeating it is safe.
            idempotent=True,
        )
        return rows, answer

    def predict(self, data: Any, *, ids: Any = None) -> Any:
        """Predicted class labels or values: a NumPy array, or a Series for a DataFrame.

        ``ids`` (one per row, e.g. an order number) name the rows in the server's prediction
        log, for :meth:`feedback` once their true values are known."""
        options = {} if ids is None else {"ids": [str(i) for i in ids]}
        rows, answer = self._predict(data, **options)
        return predictions_out(answer["predictions"], self.task, rows)

    def predict_proba(self, data: Any) -> Any:
        """Class probabilities, one column per class in :attr:`classes` order.

        A ``(n_rows, n_classes)`` array, or a DataFrame with the classes as columns.
        """
        rows, answer = self._predict(data, return_proba=True)
        return table_out(answer["probabilities"], answer["classes"], rows)

    def explain(self, data: Any, *, samples: int | None = None) -> Explanation:
        """Predictions with each feature's contribution (see :class:`Explanation`).

        ``samples`` bounds the permutations per row for models explained by sampling (the
        server's ``explain_samples``; its default when None); exact methods ignore it.
        """
        options: dict[str, Any] = {"explain": True}
        if samples is not None:
            options["explain_samples"] = samples
        rows, answer = self._predict(data, **options)
        contributions = answer["contributions"]
        multiclass = bool(contributions) and isinstance(contributions[0][0], list)
        if multiclass:
            table = np.asarray(contributions, dtype=float)
        else:
            table = table_out(contributions, self.features, rows)
        return Explanation(
            predictions=predictions_out(answer["predictions"], self.task, rows),
            contributions=table,
            bias=np.asarray(answer["bias"], dtype=float),
            features=self.features,
            classes=answer.get("classes"),
            method=str(answer.get("explanation", "exact")),
        )

    def feature_importance(self, kind: str | None = None) -> Any:
        """Importances, most important first: a DataFrame (``name``, ``importance``, ``std``)
        when pandas is installed, else a list of dicts. ``kind`` as in the API (``impurity``,
        ``permutation``, ``shap``, ...); ``None`` is the method's default."""
        answer = self.importance_answer(kind)
        features: list[dict[str, Any]] = answer["features"]
        pandas = _pandas()
        if pandas is None:
            return features
        frame = pandas.DataFrame(features, columns=["name", "importance", "std"])
        frame.attrs["kind"] = answer["kind"]
        return frame

    def importance_answer(self, kind: str | None = None) -> dict[str, Any]:
        """The server's answer behind :meth:`feature_importance`, as JSON: ``{"model_id",
        "kind", "features": [{"name", "importance", "std"}]}``."""
        params = {"kind": kind} if kind else None
        answer: dict[str, Any] = self._get(f"{self.path}/feature-importance", params=params)
        return answer

    def plot_importance(self, kind: str | None = None, *, top: int = 20, ax: Any = None) -> Any:
        """A horizontal bar chart of the ``top`` importances; needs matplotlib."""
        from coppice.plots import plot_importance

        answer = self.feature_importance(kind)
        rows = answer.to_dict("records") if hasattr(answer, "to_dict") else answer
        return plot_importance(
            rows, title=f"{self.method}: {kind or 'default'} importance", top=top, ax=ax
        )

    def plot_curves(self, *, ax: Any = None) -> Any:
        """The learning curves, one line per series; needs matplotlib."""
        from coppice.plots import plot_curves

        return plot_curves(self.curves, title=f"{self.method} {self.id[:8]}", ax=ax)

    def plot_roc(self, *, ax: Any = None) -> Any:
        """The validation ROC curve(s) with their AUC; needs matplotlib. Raises ``ValueError``
        for a model without one (a regressor, no holdout, no probabilities, > 10 classes)."""
        from coppice.plots import plot_roc

        roc = self.diagnostics.get("roc")
        if not roc:
            raise ValueError(f"Model {self.id} has no validation ROC curve: {_why(self, 'roc')}.")
        return plot_roc(roc, title=f"{self.method} {self.id[:8]}: validation ROC", ax=ax)

    def plot_residuals(self, *, ax: Any = None) -> Any:
        """Actual minus predicted against predicted on (a sample of) the validation rows;
        needs matplotlib. Raises ``ValueError`` for a model without them."""
        from coppice.plots import plot_residuals

        residuals = self.diagnostics.get("residuals")
        if not residuals:
            raise ValueError(
                f"Model {self.id} has no validation residuals: {_why(self, 'residuals')}."
            )
        title = f"{self.method} {self.id[:8]}: validation residuals"
        return plot_residuals(residuals, title=title, ax=ax)

    def monitoring(self, since: Any = None, until: Any = None) -> dict[str, Any]:
        """The drift and performance report of the logged predictions in ``[since, until)``
        (datetimes or ISO 8601 text; default the last 24 hours): per feature PSI, drift,
        missing rates and unseen categories, the predictions' drift, and the metric set on
        the rows given :meth:`feedback` (docs/monitoring.md)."""
        params = {
            key: value.isoformat() if hasattr(value, "isoformat") else str(value)
            for key, value in (("since", since), ("until", until))
            if value is not None
        }
        report: dict[str, Any] = self._get(f"{self.path}/monitoring", params=params)
        return report

    def feedback(self, ids: Any, actuals: Any) -> dict[str, Any]:
        """Send the true values of logged rows, by the ids a predict gave them; answers
        ``{"received", "matched", "unknown", "unknown_ids"}`` (unknown ids are no error)."""
        body = {"ids": [str(i) for i in ids], "actuals": np.asarray(actuals).tolist()}
        answer: dict[str, Any] = self._post(
            f"{self.path}/feedback", content=json_bytes(body), headers=JSON_HEADERS
        )
        return answer

    def register(
        self, name: str, *, alias: str | None = None, description: str | None = None
    ) -> ModelVersion:
        """Register this model as the next version of ``name`` (see :meth:`Client.register`)."""
        return self._client.register(self, name, alias=alias, description=description)

    def batch_predict(
        self,
        dataset: Dataset | str,
        *,
        keep_columns: Sequence[str] = (),
        return_proba: bool = False,
        explain: bool = False,
        name: str | None = None,
    ) -> BatchPrediction:
        """Score a stored dataset with this model as a job (see :meth:`Client.batch_predict`);
        a model fetched by ``name@alias`` is asked for by that reference."""
        return self._client.batch_predict(
            self,
            dataset,
            keep_columns=keep_columns,
            return_proba=return_proba,
            explain=explain,
            name=name,
        )

    def delete(self) -> None:
        """Delete the model on the server (a registered version cannot be: 409)."""
        self._delete(self.path)

    def export(self, format: str = "onnx", path: str | os.PathLike[str] | None = None) -> bytes:
        """The model for serving outside Coppice (docs/export.md): ``"onnx"``, an ONNX file
        whose answers equal :meth:`predict`'s, or ``"triton"``, a zipped Triton model
        repository. Written to ``path`` when given; the bytes are returned either way. A
        method that does not export raises :class:`~coppice.errors.ValidationError` (422)
        naming those that do."""
        data = self._get_bytes(f"{self.path}/export", params={"format": format})
        if path is not None:
            Path(path).write_bytes(data)
        return data


def _why(model: Model, wanted: str) -> str:
    """Why ``model`` has no ``wanted`` (``"roc"`` or ``"residuals"``) diagnostics."""
    if wanted == "roc" and model.task != "classification":
        return "it is a regressor"
    if wanted == "residuals" and model.task != "regression":
        return "it is a classifier"
    if not model.metrics.get("validation"):
        return "it was trained without a holdout"
    if wanted == "roc":
        return (
            "it gives no probabilities, has more than 10 classes, or was trained before the "
            "server kept curves"
        )
    return "it was trained before the server kept them"


def _pandas() -> Any:
    """pandas when it is installed (imported on first need: the client does not need it)."""
    if "pandas" in sys.modules:
        return sys.modules["pandas"]
    try:
        import pandas
    except ImportError:
        return None
    return pandas
