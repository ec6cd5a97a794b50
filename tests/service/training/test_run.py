"""``run_training`` on small in-memory datasets: every method and task, every validation mode."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine
from engine import TrainingInterrupted
from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.db.tables import JobRecord
from service.methods.catalog import CATALOG
from service.models.artifacts import read_artifact
from service.store import DataStore
from service.training import TrainingError, TrainingSpec, fit_steps, run_training
from service.worker.fit_process import store_outcome

N = 120
# Combiners of fitted members report no learning curve of their own.
COMBINERS = [name for name, method in CATALOG.items() if method.learner_lists]
CASES = [(name, task.value) for name, method in CATALOG.items() for task in method.tasks]


def _columns(n: int = N, seed: int = 0) -> dict[str, ColumnData]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[::11] = np.nan  # missing values in a feature
    colour = rng.integers(-1, 3, size=n).astype(np.int32)  # -1: missing category
    amount = np.nan_to_num(x) * 2 + (colour == 1) * 1.5 + rng.normal(size=n) * 0.2
    label = (amount > 0.5).astype(np.int32)
    label[5] = -1  # a row whose target is missing is left out
    amount[7] = np.nan
    return {
        "x": NumericColumn("x", x),
        "colour": CategoricalColumn("colour", colour, ("blue", "green", "red")),
        "amount": NumericColumn("amount", amount),
        "label": CategoricalColumn("label", label, ("no", "yes")),
    }


def _spec(method: str, task: str, **changes: Any) -> TrainingSpec:
    params: dict[str, Any] = {}
    cls = CATALOG[method].estimator_class(CATALOG[method].tasks[0])
    if "n_estimators" in cls.parameter_defaults():
        params["n_estimators"] = 8
    if "estimators" in CATALOG[method].learner_lists:
        # Small members of three kinds, one of them a dense-input learner the service wraps.
        linear = "logistic_regression" if task == "classification" else "ridge"
        params["estimators"] = [
            {"name": "tree", "method": "decision_tree", "params": {"max_depth": 3}},
            {"name": "forest", "method": "random_forest", "params": {"n_estimators": 8}},
            {"name": "linear", "method": linear},
        ]
    values: dict[str, Any] = {
        "method": method,
        "task": task,
        "target": "label" if task == "classification" else "amount",
        "features": ("x", "colour"),
        "params": params,
        "validation": {"holdout": 0.25},
        "seed": 3,
    }
    values.update(changes)
    return TrainingSpec(**values)


def _run(spec: TrainingSpec, columns: dict[str, ColumnData] | None = None) -> Any:
    reports: list[tuple[float, str]] = []
    outcome = run_training(
        spec, columns or _columns(), lambda f, s: reports.append((f, s)), lambda: False
    )
    return outcome, reports


def _outputs(model: Any, X: np.ndarray) -> list[np.ndarray]:
    outputs = [np.asarray(model.predict(X))]
    if hasattr(model, "predict_proba"):
        outputs.append(model.predict_proba(X))
    return outputs


@pytest.mark.parametrize(("method", "task"), CASES)
def test_every_method_and_task_trains_scores_and_saves(
    method: str, task: str, tmp_path: Path
) -> None:
    outcome, reports = _run(_spec(method, task))
    # Streamed into a store as the fit process does (piece by piece, sized and hashed on the
    # way): exactly save_model's bytes, and a model that predicts bit for bit as the fitted one.
    store = DataStore(str(tmp_path / "store"))
    stored = store_outcome(store, outcome).artifact
    whole = outcome.artifact
    assert (stored.size, stored.sha256) == (len(whole), hashlib.sha256(whole).hexdigest())
    streamed = engine.load_model(read_artifact(store, stored))
    X_mixed = np.array([[0.3, 1.0], [np.nan, np.nan], [-2.0, 0.0], [1.5, 2.0]])
    pairs = zip(_outputs(streamed, X_mixed), _outputs(outcome.model, X_mixed), strict=True)
    for ours, fitted in pairs:
        assert ours.dtype == fitted.dtype
        if ours.dtype.hasobject:  # labels
            assert ours.tolist() == fitted.tolist()
        else:
            assert ours.tobytes() == fitted.tobytes()

    assert outcome.features == [
        {"name": "x", "kind": "numeric"},
        {"name": "colour", "kind": "categorical"},
    ]
    assert outcome.encoding["categories"] == {"colour": ["blue", "green", "red"]}
    assert outcome.n_rows == N - 1 and outcome.n_train_rows + outcome.n_validation_rows == N - 1
    assert outcome.sha256 == hashlib.sha256(outcome.artifact).hexdigest()
    assert outcome.size == len(outcome.artifact)
    model = engine.load_model(outcome.artifact)
    X = np.array([[0.3, 1.0], [np.nan, np.nan], [-2.0, 0.0]])
    predictions = model.predict(X)
    assert predictions.shape == (3,)
    train, validation = outcome.metrics["train"], outcome.metrics["validation"]
    assert outcome.metrics["cv"] is None
    if task == "classification":
        assert outcome.classes == ["no", "yes"] == outcome.encoding["classes"]
        assert set(predictions) <= {"no", "yes"}
        labels_only = not hasattr(model, "predict_proba")  # the perceptron
        assert labels_only or model.predict_proba(X).shape == (3, 2)
        for scores in (train, validation):
            assert 0.5 <= scores["accuracy"] <= 1 and 0 <= scores["f1_macro"] <= 1
            if labels_only:
                assert scores["roc_auc"] is None and scores["log_loss"] is None
            else:
                assert 0.5 <= scores["roc_auc"] <= 1 and scores["log_loss"] >= 0
        assert np.sum(validation["confusion_matrix"]) == outcome.n_validation_rows
    else:
        assert outcome.classes is None
        assert validation["r2"] > 0.3 and 0 < validation["mae"] <= validation["rmse"]
    assert 0 < outcome.n_estimators <= 8
    assert reports and all(0 <= f <= 1 for f, _ in reports)
    assert [f for f, _ in reports] == sorted(f for f, _ in reports)
    if not hasattr(model, "feature_importances_"):
        # No impurity of its own (base learners, combiners): permutation importance is
        # computed when first asked for.
        assert "impurity" not in outcome.importances
    else:
        importances = outcome.importances["impurity"]
        assert {item["name"] for item in importances} == {"x", "colour"}
        assert importances[0]["importance"] >= importances[1]["importance"]
    # The resolved params hold every default and never the service-controlled ones.
    assert "random_state" not in outcome.resolved_params
    if method in ("decision_tree", *COMBINERS):
        assert outcome.curves is None
    # Extra trees draw no bootstrap (no out-of-bag curve); a base learner's iterative solver
    # may report its training loss or nothing.
    elif method != "extra_trees" and not CATALOG[method].dense_input:
        curves = outcome.curves
        assert curves is not None and curves["iterations"][0] == 1
        assert any(curves[name] for name in ("train", "validation", "oob"))


def test_bootstrap_ensembles_get_oob_metrics_and_curve() -> None:
    outcome, reports = _run(_spec("random_forest", "classification"))
    assert outcome.resolved_params["oob_score"] is True
    assert outcome.metrics["oob"]["accuracy"] > 0.5
    assert outcome.curves["metric"] == "error" and len(outcome.curves["oob"]) == 8
    assert "tree 8/8" in [stage for _, stage in reports]
    asked_not = _spec(
        "random_forest", "classification", params={"n_estimators": 4, "oob_score": False}
    )
    outcome, _ = _run(asked_not)
    assert outcome.metrics["oob"] is None and outcome.resolved_params["oob_score"] is False


def test_gradient_boosting_curves_have_train_and_validation_loss() -> None:
    outcome, _ = _run(_spec("gradient_boosting", "classification"))
    curves = outcome.curves
    assert curves["metric"] == "log_loss" and len(curves["train"]) == len(curves["validation"]) == 8
    assert curves["train"][-1] < curves["train"][0]


def test_nested_learner_gets_categorical_features_and_is_resolved() -> None:
    spec = _spec(
        "bagging",
        "classification",
        params={
            "n_estimators": 4,
            "estimator": {"method": "decision_tree", "params": {"max_depth": 2}},
        },
    )
    outcome, _ = _run(spec)
    learner = outcome.resolved_params["estimator"]
    assert learner["method"] == "decision_tree" and learner["params"]["max_depth"] == 2
    assert learner["params"]["criterion"] == "gini"
    model = engine.load_model(outcome.artifact)
    assert list(model.estimator.categorical_features) == [1]


def test_cross_validation_reports_mean_and_std_then_fits_all_rows() -> None:
    outcome, reports = _run(_spec("random_forest", "regression", validation={"folds": 3}))
    cv = outcome.metrics["cv"]
    assert set(cv) == {"rmse", "mae", "r2"}
    assert cv["r2"]["mean"] > 0.3 and cv["r2"]["std"] >= 0
    assert outcome.metrics["validation"] is None
    assert outcome.n_train_rows == N - 1 and outcome.n_validation_rows == 0
    stages = [stage for _, stage in reports]
    assert "fold 1/3: tree 1/8" in stages and "final fit: tree 8/8" in stages
    classification, _ = _run(_spec("adaboost", "classification", validation={"folds": 4}))
    assert set(classification.metrics["cv"]) == {"accuracy", "log_loss", "roc_auc", "f1_macro"}


def test_holdout_zero_trains_on_every_row() -> None:
    outcome, _ = _run(_spec("gradient_boosting", "regression", validation={"holdout": 0}))
    assert outcome.metrics["validation"] is None and outcome.n_train_rows == N - 1
    assert outcome.curves["validation"] == []


def test_numeric_target_as_classes_and_multiclass() -> None:
    columns = _columns()
    rng = np.random.default_rng(1)
    columns["grade"] = NumericColumn("grade", rng.integers(1, 4, size=N).astype(np.float64))
    outcome, _ = _run(_spec("random_forest", "classification", target="grade"), columns)
    assert outcome.classes == ["1", "2", "3"]
    assert len(outcome.metrics["validation"]["confusion_matrix"]) == 3
    assert outcome.metrics["validation"]["roc_auc"] is not None


def test_same_seed_same_model() -> None:
    first, _ = _run(_spec("extra_trees", "classification"))
    second, _ = _run(_spec("extra_trees", "classification"))
    assert first.sha256 == second.sha256
    other, _ = _run(_spec("extra_trees", "classification", seed=4))
    assert other.sha256 != first.sha256


def test_should_stop_interrupts_training() -> None:
    calls = []

    def stop_after_three() -> bool:
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(TrainingInterrupted):
        run_training(
            _spec("random_forest", "classification"),
            _columns(),
            lambda f, s: None,
            stop_after_three,
        )
    with pytest.raises(TrainingInterrupted):
        run_training(
            _spec("decision_tree", "regression"), _columns(), lambda f, s: None, lambda: True
        )


def _training_error(spec: TrainingSpec, columns: dict[str, ColumnData]) -> TrainingError:
    with pytest.raises(TrainingError) as caught:
        run_training(spec, columns, lambda f, s: None, lambda: False)
    return caught.value


def test_degenerate_data_is_a_training_error() -> None:
    columns = _columns()
    codes = np.zeros(N, dtype=np.int32)
    codes[:3] = -1
    columns["label"] = CategoricalColumn("label", codes, ("no", "yes"))
    assert _training_error(_spec("bagging", "classification"), columns).code == "one_class"

    columns["amount"] = NumericColumn("amount", np.full(N, 2.0))
    error = _training_error(_spec("bagging", "regression"), columns)
    assert error.code == "constant_target" and "amount" in error.message

    columns["amount"] = NumericColumn("amount", np.full(N, np.nan))
    assert _training_error(_spec("bagging", "regression"), columns).code == "no_rows"


def test_too_few_rows_for_the_validation_is_a_training_error() -> None:
    small = {name: _slice(column, 4) for name, column in _columns().items()}
    spec = _spec("decision_tree", "regression", validation={"folds": 5})
    assert _training_error(spec, small).code == "too_few_rows"
    spec = _spec("decision_tree", "regression", validation={"holdout": 0.05})
    assert _training_error(spec, small).code == "too_few_rows"


def test_a_fold_with_one_class_is_a_training_error() -> None:
    columns = _columns()
    codes = np.zeros(N, dtype=np.int32)
    codes[0] = 1
    columns["label"] = CategoricalColumn("label", codes, ("no", "yes"))
    # The rare class sits out of the training rows of the fold that holds it.
    assert (
        _training_error(_spec("bagging", "classification", validation={"folds": 2}), columns).code
        == "one_class"
    )


def test_too_many_categories_and_invalid_params_are_training_errors() -> None:
    columns = _columns()
    categories = tuple(f"c{i:03d}" for i in range(300))
    columns["colour"] = CategoricalColumn(
        "colour", (np.arange(N) % 300).astype(np.int32), categories
    )
    assert (
        _training_error(_spec("bagging", "classification"), columns).code == "too_many_categories"
    )
    spec = _spec("bagging", "classification", params={"n_estimators": -1})
    error = _training_error(spec, _columns())
    assert error.code == "invalid_params" and "params.n_estimators" in error.message


def test_spec_from_a_job_record() -> None:
    job = JobRecord(
        id="j1",
        method="adaboost",
        task="classification",
        target="label",
        features=["x", "colour"],
        params={"n_estimators": 5},
        validation={"holdout": 0.2},
        seed=11,
    )
    spec = TrainingSpec.from_job(job, n_jobs=2)
    assert spec == TrainingSpec(
        "adaboost", "classification", "label", ("x", "colour"), {"n_estimators": 5},
        {"holdout": 0.2}, 11, 2,
    )  # fmt: skip
    assert spec.columns == ("x", "colour", "label")
    outcome, _ = _run(spec)
    assert outcome.n_estimators == 5


def _slice(column: ColumnData, n: int) -> ColumnData:
    if isinstance(column, NumericColumn):
        return NumericColumn(column.name, column.values[:n])
    return CategoricalColumn(column.name, column.codes[:n], column.categories)


def test_processes_do_not_change_the_model() -> None:
    one, _ = _run(_spec("random_forest", "regression", params={"n_estimators": 4}))
    two, _ = _run(_spec("random_forest", "regression", params={"n_estimators": 4}, n_jobs=2))
    # The artifacts differ only in the recorded n_jobs; the models are the same.
    assert one.metrics == two.metrics
    X = np.array([[0.3, 1.0], [np.nan, 2.0]])
    assert np.array_equal(
        engine.load_model(one.artifact).predict(X), engine.load_model(two.artifact).predict(X)
    )


def test_training_metrics_are_scored_on_a_stratified_sample_past_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = _spec("random_forest", "classification", validation={"holdout": 0})
    everything, _ = _run(spec)
    assert np.sum(everything.metrics["train"]["confusion_matrix"]) == everything.n_train_rows

    monkeypatch.setattr(fit_steps, "TRAIN_SCORE_ROWS", 40)
    sampled, _ = _run(spec)
    matrix = np.asarray(sampled.metrics["train"]["confusion_matrix"])
    assert sampled.n_train_rows == N - 1 and 39 <= matrix.sum() <= 41
    # Stratified: each class keeps its share of the training rows.
    labels = _columns()["label"].codes
    shares = np.bincount(labels[labels >= 0]) / np.sum(labels >= 0)
    np.testing.assert_allclose(matrix.sum(axis=1) / matrix.sum(), shares, atol=0.03)
    assert sampled.metrics["train"] != everything.metrics["train"]
    assert _run(spec)[0].metrics["train"] == sampled.metrics["train"]  # the seed draws it
    # The model itself is fitted on every row either way.
    assert sampled.artifact == everything.artifact


def test_gradient_boosting_train_curve_uses_the_same_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = _spec("gradient_boosting", "regression", validation={"holdout": 0})
    everything, _ = _run(spec)
    monkeypatch.setattr(fit_steps, "TRAIN_SCORE_ROWS", 30)
    sampled, _ = _run(spec)
    assert len(sampled.curves["train"]) == len(everything.curves["train"])
    assert sampled.curves["train"] != everything.curves["train"]
    assert sampled.curves["train"][-1] == pytest.approx(sampled.metrics["train"]["rmse"] ** 2)
