"""Fits from a dataset's parts (``PartTable``): the feature values are read part by part into
bin codes, never whole, and the outcome is the fit from the columns in memory, bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine
from service.datasets.arrow_columns import column_batches, schema_of
from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.datasets.parts import PartWriter
from service.datasets.service import part_records
from service.store import DataStore
from service.training import TrainingSpec, run_training
from service.training.data import prepare
from service.training.part_table import PartTable
from service.training.run import class_codes

N = 3_000


def _columns(n: int = N) -> dict[str, ColumnData]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    x[::13] = np.nan
    wide = np.round(rng.lognormal(size=n), 3)
    colour = rng.integers(-1, 4, size=n).astype(np.int32)  # -1: missing category
    amount = np.nan_to_num(x) * 2 + (colour == 1) * 1.5 - 0.3 * wide + rng.normal(size=n) * 0.3
    label = (amount > 0.3).astype(np.int32) + (amount > 2).astype(np.int32)
    label[5] = -1  # rows whose target is missing are left out
    amount[[7, 8]] = np.nan
    return {
        "x": NumericColumn("x", x),
        "wide": NumericColumn("wide", wide),
        "colour": CategoricalColumn("colour", colour, ("blue", "green", "red", "teal")),
        "amount": NumericColumn("amount", amount),
        "label": CategoricalColumn("label", label, ("high", "low", "mid")),
    }


def _table(tmp_path: Path, columns: dict[str, ColumnData]) -> PartTable:
    """The columns as three parts of two 512-row row groups each (the last one shorter)."""
    store = DataStore(str(tmp_path / "store"))
    ordered = list(columns.values())
    writer = PartWriter(store, "d1", schema_of(ordered), row_group_rows=512, groups_per_part=2)
    for batch in column_batches(ordered, 700):
        writer.write(batch)
    parts = part_records("d1", writer.finish())
    assert len(parts) == 3
    kinds = {c.name: c.kind.value for c in ordered}
    return PartTable(store, parts, kinds, N)


CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("random_forest", "classification", {"n_estimators": 6}, {"holdout": 0.2}),
    ("random_forest", "regression", {"n_estimators": 6, "n_jobs": 2}, {"folds": 3}),
    ("extra_trees", "classification", {"n_estimators": 6}, {"holdout": 0}),
    ("decision_tree", "regression", {"max_depth": 5}, {"holdout": 0.25}),
    (
        "xgboost",
        "classification",
        {"n_estimators": 6, "subsample": 0.8},
        {"folds": 3, "keep_predictions": True},
    ),
    ("xgboost", "regression", {"n_estimators": 6}, {"holdout": 0.2, "rows": 1_500}),
    # Bagging of decision trees grows them as a forest does, from the codes (OOB included).
    (
        "bagging",
        "classification",
        {"n_estimators": 5, "max_samples": 0.7, "max_features": 0.67},
        {"holdout": 0.2},
    ),
    ("bagging", "regression", {"n_estimators": 4, "bootstrap_features": True}, {"folds": 2}),
    (
        "gradient_boosting",
        "classification",
        {"n_estimators": 5, "subsample": 0.8},
        {"holdout": 0.2},
    ),
    ("gradient_boosting", "regression", {"n_estimators": 5}, {"folds": 2}),
]


@pytest.mark.parametrize(("method", "task", "params", "validation"), CASES)
def test_a_fit_from_parts_is_the_fit_from_memory(
    tmp_path: Path, method: str, task: str, params: dict[str, Any], validation: dict[str, Any]
) -> None:
    columns = _columns()
    spec = TrainingSpec(
        method=method,
        task=task,
        target="label" if task == "classification" else "amount",
        features=("x", "colour", "wide"),
        params={k: v for k, v in params.items() if k != "n_jobs"},
        validation=validation,
        seed=7,
        n_jobs=params.get("n_jobs", 1),
    )
    table = _table(tmp_path, columns)
    stages: list[str] = []
    from_parts = run_training(spec, table, lambda f, s: stages.append(s), lambda: False)
    in_memory = run_training(spec, columns, lambda f, s: None, lambda: False)

    # No column was read whole or kept: the target's labels are the run's own (data.y).
    assert set(table._columns) == set()
    assert any("binning the parts" in stage for stage in stages)
    assert from_parts.sha256 == in_memory.sha256
    assert from_parts.metrics == in_memory.metrics
    assert from_parts.curves == in_memory.curves
    assert from_parts.importances == in_memory.importances
    assert from_parts.encoding == in_memory.encoding
    if in_memory.out_of_fold is not None:
        np.testing.assert_array_equal(from_parts.out_of_fold, in_memory.out_of_fold)
    model = engine.load_model(from_parts.artifact)
    assert model is not None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("logistic_regression", {}),
        ("gradient_boosting", {"n_estimators": 3, "n_iter_no_change": 2}),
        ("adaboost", {"n_estimators": 3}),
        ("bagging", {"n_estimators": 3, "estimator": {"method": "gaussian_nb"}}),
    ],
)
def test_a_method_that_needs_the_float_table_reads_the_columns_whole(
    tmp_path: Path, method: str, params: dict[str, Any]
) -> None:
    columns = _columns()
    spec = TrainingSpec(
        method=method,
        task="classification",
        target="label",
        features=("x", "colour"),
        params=params,
        validation={"holdout": 0.2},
        seed=1,
    )
    table = _table(tmp_path, columns)
    from_parts = run_training(spec, table, lambda f, s: None, lambda: False)
    in_memory = run_training(spec, columns, lambda f, s: None, lambda: False)
    assert set(table._columns) == {"x", "colour", "label"}
    assert from_parts.sha256 == in_memory.sha256
    assert from_parts.metrics == in_memory.metrics


def test_predictions_from_codes_in_small_chunks_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scored, validation and held-out rows are predicted a chunk of codes at a time; chunks of
    # 97 rows cut every set of them into many pieces.
    from service.training import run as run_module

    monkeypatch.setattr(run_module, "ROUTING_CHUNK_ROWS", 97)
    columns = _columns()
    spec = TrainingSpec(
        method="random_forest",
        task="classification",
        target="label",
        features=("x", "colour", "wide"),
        params={"n_estimators": 4},
        validation={"folds": 2, "keep_predictions": True},
        seed=3,
    )
    from_parts = run_training(spec, _table(tmp_path, columns), lambda f, s: None, lambda: False)
    in_memory = run_training(spec, columns, lambda f, s: None, lambda: False)
    assert from_parts.metrics == in_memory.metrics
    np.testing.assert_array_equal(from_parts.out_of_fold, in_memory.out_of_fold)


def test_past_the_binner_subsample_the_model_is_the_same_and_the_baseline_a_sample(
    tmp_path: Path,
) -> None:
    # 210,000 rows: the binning reads a seeded 200,000 of them for the edges, and those rows
    # (not all) give the monitoring baseline's feature proportions.
    n = 210_000
    rng = np.random.default_rng(5)
    x = rng.normal(size=n)
    colour = rng.integers(-1, 4, size=n).astype(np.int32)
    columns: dict[str, ColumnData] = {
        "x": NumericColumn("x", x),
        "colour": CategoricalColumn("colour", colour, ("blue", "green", "red", "teal")),
        "amount": NumericColumn("amount", x * 2 + (colour == 1) + rng.normal(size=n)),
    }
    store = DataStore(str(tmp_path / "store"))
    writer = PartWriter(store, "d2", schema_of(list(columns.values())), row_group_rows=1 << 15)
    for batch in column_batches(list(columns.values()), 50_000):
        writer.write(batch)
    parts = part_records("d2", writer.finish())
    table = PartTable(store, parts, {c.name: c.kind.value for c in columns.values()}, n)
    spec = TrainingSpec(
        method="decision_tree",
        task="regression",
        target="amount",
        features=("x", "colour"),
        params={"max_depth": 4},
        validation={"holdout": 0},
        seed=2,
    )
    from_parts = run_training(spec, table, lambda f, s: None, lambda: False)
    in_memory = run_training(spec, columns, lambda f, s: None, lambda: False)
    assert from_parts.sha256 == in_memory.sha256
    monitoring = from_parts.metrics.pop("monitoring")
    expected = in_memory.metrics.pop("monitoring")
    assert from_parts.metrics == in_memory.metrics
    assert monitoring["rows"] == expected["rows"] == n
    assert monitoring["prediction"] == expected["prediction"]
    for found, full in zip(monitoring["features"], expected["features"], strict=True):
        # A 200,000-row uniform sample's proportions: within a point of all rows'.
        assert np.allclose(found["proportions"], full["proportions"], atol=0.01)


def test_staged_curves_read_their_rows_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gradient boosting's curves from parts decode the rows' codes a chunk at a time; the
    chunks' shares add up to the curves the whole rows give."""
    from service.training import curves

    columns = _columns()
    spec = TrainingSpec(
        method="gradient_boosting",
        task="classification",
        target="label",
        features=("x", "colour", "wide"),
        params={"n_estimators": 4},
        validation={"holdout": 0.2},
        seed=3,
    )
    whole = run_training(spec, columns, lambda f, s: None, lambda: False).curves
    monkeypatch.setattr(curves, "CHUNK_ROWS", 256)
    chunked = run_training(spec, _table(tmp_path, columns), lambda f, s: None, lambda: False)
    assert whole is not None and chunked.curves is not None
    assert len(whole["train"]) == len(whole["validation"]) == 4
    for name in ("train", "validation"):
        np.testing.assert_allclose(chunked.curves[name], whole[name], rtol=1e-12)
        assert chunked.curves[name] != whole[name]  # summed in pieces, not in one mean


def test_a_classifier_from_parts_learns_from_one_byte_a_row() -> None:
    """The labels' indices into the run's classes (int8 for up to 128 classes), which the
    engine encodes as it would the labels: the parity test above holds the models equal."""
    spec = TrainingSpec(
        method="xgboost",
        task="classification",
        target="label",
        features=("x",),
        params={},
        validation={},
        seed=0,
    )
    data = prepare(spec, _columns())
    rows = np.arange(0, data.y.size, 3, dtype=np.intp)
    codes = class_codes(data, rows)
    assert codes.dtype == np.int8
    assert data.classes is not None
    np.testing.assert_array_equal(np.asarray(data.classes)[codes], data.y[rows])
