"""``Model`` against a real server: predictions for every input kind (pandas in, pandas out),
explanations, importances, metrics, curves and plots."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

from coppice import Client, Model, NotFoundError, ValidationError
from tests.client.helpers import churn_frame

matplotlib.use("Agg")  # no display in tests

FEATURES = ["age", "plan", "monthly"]


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    frame = churn_frame(8, seed=5).drop(columns="churned")
    frame.index = pd.Index([f"r{i}" for i in range(8)])
    return frame


def test_a_model_reads_as_the_server_describes_it(churn_model: Model, client: Client) -> None:
    assert churn_model.features == FEATURES
    assert churn_model.target == "churned" and churn_model.task == "classification"
    assert churn_model.classes == ["no", "yes"]
    assert churn_model.params["n_estimators"] == 12
    assert 0.0 <= churn_model.metrics["validation"]["accuracy"] <= 1.0
    assert client.model(churn_model.id).info == churn_model.info


def test_pandas_in_pandas_out(churn_model: Model, rows: pd.DataFrame) -> None:
    predicted = churn_model.predict(rows)
    probabilities = churn_model.predict_proba(rows)

    assert isinstance(predicted, pd.Series) and list(predicted.index) == list(rows.index)
    assert set(predicted) <= {"no", "yes"}
    assert isinstance(probabilities, pd.DataFrame)
    assert list(probabilities.columns) == ["no", "yes"]
    assert list(probabilities.index) == list(rows.index)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    # The most probable class is the prediction.
    assert list(probabilities.idxmax(axis=1)) == list(predicted)


def test_arrays_records_and_one_record_give_numpy_and_the_same_answers(
    churn_model: Model, rows: pd.DataFrame
) -> None:
    expected = churn_model.predict(rows).to_numpy()
    as_array = rows[FEATURES].to_numpy(dtype=object)
    records = rows.to_dict("records")

    for data in (as_array, records):
        predicted = churn_model.predict(data)
        assert isinstance(predicted, np.ndarray)
        assert list(predicted) == list(expected)
    assert list(churn_model.predict(records[0])) == [expected[0]]
    assert churn_model.predict_proba(as_array).shape == (8, 2)


def test_missing_values_and_unknown_categories_are_accepted(churn_model: Model) -> None:
    numeric = np.array([[30.0, np.nan, np.nan]], dtype=object)
    predicted = churn_model.predict([{"age": 40, "plan": "never-seen", "monthly": None}])
    assert len(predicted) == 1
    assert len(churn_model.predict(numeric)) == 1


def test_a_misspelt_column_is_a_validation_error_naming_it(churn_model: Model) -> None:
    with pytest.raises(ValidationError, match="monthy"):
        churn_model.predict([{"age": 40, "plan": "pro", "monthy": 3.0}])
    with pytest.raises(ValueError, match="3 features"):
        churn_model.predict(np.zeros((2, 5)))


def test_explain_gives_contributions_that_sum_to_the_raw_score(
    churn_model: Model, rows: pd.DataFrame
) -> None:
    explanation = churn_model.explain(rows)

    contributions = explanation.contributions
    assert isinstance(contributions, pd.DataFrame)
    assert list(contributions.columns) == FEATURES
    assert explanation.bias.shape == (8,)
    # A forest's raw score is the probability of the second class.
    raw = contributions.sum(axis=1).to_numpy() + explanation.bias
    np.testing.assert_allclose(raw, churn_model.predict_proba(rows)["yes"], atol=1e-9)
    assert isinstance(churn_model.explain(rows.to_numpy()).contributions, np.ndarray)


def test_explain_says_how_and_plots_a_row(
    churn_model: Model, client: Client, rows: pd.DataFrame
) -> None:
    exact = churn_model.explain(rows)
    assert exact.method == "exact"
    # k-NN has no structure to explain exactly: sampled Shapley values, the bound passed on.
    dataset = client.upload(churn_frame(80), name="knn")
    knn = client.train(dataset, target="churned", method="k_neighbors").wait(timeout=60)
    sampled = knn.explain(rows.iloc[:2], samples=8)
    assert sampled.method == "sampled"
    np.testing.assert_allclose(
        sampled.contributions.sum(axis=1).to_numpy() + sampled.bias,
        knn.predict_proba(rows.iloc[:2])["yes"],
        atol=1e-9,
    )
    axes = exact.plot(row=1, top=2)
    heights = [patch.get_width() for patch in axes.patches]
    assert len(heights) == 3  # the two largest and the rest summed
    assert sum(heights) + exact.bias[1] == pytest.approx(
        exact.contributions.iloc[1].sum() + exact.bias[1]
    )
    knn.delete()


@pytest.mark.parametrize("kind", [None, "impurity", "permutation", "shap"])
def test_feature_importance_is_a_dataframe(churn_model: Model, kind: str | None) -> None:
    importance = churn_model.feature_importance(kind)

    assert isinstance(importance, pd.DataFrame)
    assert list(importance.columns) == ["name", "importance", "std"]
    assert sorted(importance["name"]) == sorted(FEATURES)
    assert importance["importance"].is_monotonic_decreasing
    assert importance.attrs["kind"] == (kind or "impurity")


def test_an_importance_kind_the_model_lacks_names_the_ones_it_has(churn_model: Model) -> None:
    with pytest.raises(ValidationError, match="impurity"):
        churn_model.feature_importance("gain")


def test_curves_and_plots(churn_model: Model) -> None:
    curves = churn_model.curves
    assert curves["metric"] and len(curves["oob"]) == len(curves["iterations"]) > 0

    curve_axes = churn_model.plot_curves()
    importance_axes = churn_model.plot_importance("permutation", top=2)

    assert [line.get_label() for line in curve_axes.get_lines()] == ["oob"]
    assert len(importance_axes.patches) == 2


def test_importance_kinds_and_validation_diagnostics(churn_model: Model, client: Client) -> None:
    assert churn_model.importance_kinds == ["impurity", "permutation", "oob_permutation", "shap"]
    models = client.models(method="random_forest", limit=1000)
    listed = next(model for model in models if model.id == churn_model.id)
    assert listed.importance_kinds == churn_model.importance_kinds

    diagnostics = churn_model.diagnostics
    assert diagnostics["model_id"] == churn_model.id and diagnostics["residuals"] is None
    (curve,) = diagnostics["roc"].values()
    assert list(diagnostics["roc"]) == ["yes"]
    assert curve["auc"] == churn_model.metrics["validation"]["roc_auc"]
    roc_axes = churn_model.plot_roc()
    assert roc_axes.get_lines()[0].get_label().startswith("yes (AUC 0.")
    with pytest.raises(ValueError, match="it is a classifier"):
        churn_model.plot_residuals()


def test_a_regressor_plots_its_residuals_and_a_folds_model_has_none(client: Client) -> None:
    frame = churn_frame(120).drop(columns="churned")
    frame["spend"] = frame["monthly"].fillna(0) * 12 + frame["age"].fillna(40)
    dataset = client.upload(frame, name="spend")
    trained = [
        client.train(
            dataset,
            target="spend",
            method="random_forest",
            params={"n_estimators": 8},
            validation=validation,
            seed=2,
        )
        for validation in ({"holdout": 0.25}, {"folds": 2})
    ]
    regressor, folds = (job.wait(timeout=120) for job in trained)

    residuals = regressor.diagnostics["residuals"]
    assert len(residuals["predicted"]) == len(residuals["actual"]) == 30
    assert len(regressor.plot_residuals().collections[0].get_offsets()) == 30
    assert folds.diagnostics["residuals"] is None and folds.diagnostics["validation_rows"] is None
    assert folds.importance_kinds == ["impurity", "oob_permutation"]
    with pytest.raises(ValueError, match="without a holdout"):
        folds.plot_residuals()


def test_a_model_without_curves_says_so(client: Client) -> None:
    dataset = client.upload(churn_frame(60), name="tree")
    tree = client.train(dataset, target="churned", method="decision_tree").wait(timeout=60)

    with pytest.raises(NotFoundError) as missing:
        _ = tree.curves
    assert "curve" in missing.value.detail

    tree.delete()
    with pytest.raises(NotFoundError):
        client.model(tree.id)


def test_regression_predictions_are_floats(client: Client) -> None:
    frame = churn_frame(80).drop(columns="churned")
    frame["spend"] = frame["monthly"].fillna(0) * 12
    dataset = client.upload(frame, name="regression")
    model = client.train(
        dataset, target="spend", method="xgboost", params={"n_estimators": 10}
    ).wait(timeout=60)

    predicted = model.predict(frame.drop(columns="spend").to_numpy(dtype=object))

    assert model.task == "regression" and model.classes is None
    assert predicted.dtype == np.float64 and predicted.shape == (80,)
