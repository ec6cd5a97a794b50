"""A dataset's stored parts read on Dask workers (``service.training.worker_parts``) for the
engine's out-of-core boosting: the model is the one fitted on the columns in memory."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import XGBoostClassifier, XGBoostRegressor, parallel_backend
from service.datasets.arrow_columns import column_batches, schema_of
from service.datasets.columns import CategoricalColumn
from service.datasets.parts import PartWriter
from service.datasets.service import part_records
from service.store import DataStore
from service.training import fit_steps
from service.training.part_table import PartTable
from service.training.worker_parts import read_worker_part, worker_parts
from tests.service.parquet_opens import log_opens, register_by_value
from tests.service.training.test_fit_from_parts import N, _columns

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

# The workers do not import the tests: the open logger travels by value.
register_by_value()

FEATURES = ("x", "colour", "wide")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster, set_as_default=False) as client:
        yield client
    cluster.close()


def _stored(tmp_path: Path) -> tuple[dict[str, Any], PartTable]:
    """The test table's columns, and the same as stored parts (one 1,024-row group each)."""
    columns = _columns()
    store = DataStore(str(tmp_path / "store"))
    ordered = list(columns.values())
    writer = PartWriter(store, "d1", schema_of(ordered), row_group_rows=1024, groups_per_part=1)
    for batch in column_batches(ordered, 700):
        writer.write(batch)
    records = part_records("d1", writer.finish())
    return columns, PartTable(store, records, {c.name: c.kind.value for c in ordered}, N)


@pytest.mark.parametrize("target", ["amount", "label"])
def test_workers_read_the_stored_parts_into_the_in_memory_model(
    client: Any, tmp_path: Path, target: str
) -> None:
    columns, table = _stored(tmp_path)
    store, records, kinds = table.store, table.parts, table.kinds
    table.first_pass(target, FEATURES)
    X = np.column_stack([columns[name].as_float() for name in FEATURES])
    params: dict[str, Any] = {"n_estimators": 5, "max_depth": 4, "random_state": 3}
    if target == "amount":
        y = columns["amount"].as_float()
        keep = ~np.isnan(y)
        local = XGBoostRegressor(**params, categorical_features=[1]).fit(X[keep], y[keep])
        parts = worker_parts(store, records, FEATURES, target, kinds, table.categories)
        with parallel_backend(client):
            remote = XGBoostRegressor(**params, categorical_features=[1]).fit_parts(
                parts, read_worker_part
            )
        np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)
    else:
        label = columns["label"]
        assert isinstance(label, CategoricalColumn)
        keep = label.codes >= 0
        labels = np.asarray(label.categories)[label.codes[keep]]
        local_c = XGBoostClassifier(**params, categorical_features=[1]).fit(X[keep], labels)
        classes = sorted(set(labels.tolist()))
        parts = worker_parts(store, records, FEATURES, target, kinds, table.categories, classes)
        with parallel_backend(client):
            remote_c = XGBoostClassifier(**params, categorical_features=[1]).fit_parts(
                parts, read_worker_part
            )
        np.testing.assert_array_equal(remote_c.classes_, np.arange(len(classes)))
        np.testing.assert_allclose(
            remote_c.predict_proba(X), local_c.predict_proba(X), rtol=0, atol=1e-12
        )


def _approx(a: Any, b: Any) -> None:
    """Two metric trees equal, their numbers within 1e-9 (sums in another order)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
        for key in a:
            _approx(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), (a, b)
        for x, y in zip(a, b, strict=True):
            _approx(x, y)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), (a, b)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize(
    ("task", "target", "validation", "score_rows"),
    [
        ("classification", "label", {"holdout": 0.2}, None),
        ("classification", "label", {"holdout": 0.2}, 150),  # a sample of the training rows
        ("classification", "label", {"holdout": 0}, None),
        ("regression", "amount", {"holdout": 0.25}, 150),
        ("regression", "amount", {"folds": 3}, None),
    ],
)
def test_run_training_on_a_cluster_fits_xgboost_out_of_core(
    client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    task: str,
    target: str,
    validation: dict[str, Any],
    score_rows: int | None,
) -> None:
    """A job's fits from parts on a Dask cluster read the parts on the workers; the outcome
    is the in-memory run's (metrics within 1e-9: sums in another order), the holdout split,
    the scored rows and the metrics made on the workers (service.training.out_of_core)."""
    import engine
    from engine.boosting._xgboost_base import BaseXGBoost
    from service.training import TrainingSpec, run_training

    fitted: list[int] = []
    original = BaseXGBoost.fit_parts

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        fitted.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseXGBoost, "fit_parts", counted)
    if score_rows is not None:
        monkeypatch.setattr(fit_steps, "TRAIN_SCORE_ROWS", score_rows)
    columns, table = _stored(tmp_path)
    spec = TrainingSpec(
        method="xgboost",
        task=task,
        target=target,
        features=FEATURES,
        params={"n_estimators": 6, "max_depth": 4},
        validation=validation,
        seed=7,
    )
    with engine.parallel_backend(client):
        from_parts = run_training(spec, table, lambda f, s: None, lambda: False)
    in_memory = run_training(spec, columns, lambda f, s: None, lambda: False)
    assert len(fitted) == (3 + 1 if "folds" in validation else 1)
    _approx(from_parts.metrics, in_memory.metrics)
    _approx(from_parts.importances, in_memory.importances)
    _approx(from_parts.curves, in_memory.curves)
    assert from_parts.encoding == in_memory.encoding
    X = np.column_stack([columns[name].as_float() for name in FEATURES])
    remote, local = engine.load_model(from_parts.artifact), engine.load_model(in_memory.artifact)
    if task == "classification":
        np.testing.assert_array_equal(remote.classes_, local.classes_)
        np.testing.assert_allclose(
            remote.predict_proba(X), local.predict_proba(X), rtol=0, atol=1e-12
        )
    else:
        np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)


def test_past_the_distinct_scores_bound_the_roc_comes_from_a_sketch(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more distinct validation scores than ``MAX_DISTINCT_SCORES`` the workers send
    counts in cells between their scores' order statistics: the areas and the curves stay
    near the exact ones, every other metric is exact, and the curve still runs (0,0)-(1,1)."""
    import engine
    from service.training import TrainingSpec, out_of_core, run_training

    _, table = _stored(tmp_path)
    spec = TrainingSpec(
        method="xgboost",
        task="classification",
        target="label",
        features=FEATURES,
        params={"n_estimators": 8, "max_depth": 4},
        validation={"holdout": 0.3},
        seed=2,
    )
    with engine.parallel_backend(client):
        exact = run_training(spec, table, lambda f, s: None, lambda: False).metrics
        monkeypatch.setattr(out_of_core, "MAX_DISTINCT_SCORES", 40)
        sketched = run_training(spec, table, lambda f, s: None, lambda: False).metrics
    for name in ("accuracy", "log_loss", "f1_macro", "confusion_matrix"):
        assert sketched["validation"][name] == exact["validation"][name]
    assert sketched["validation"]["roc_auc"] == pytest.approx(
        exact["validation"]["roc_auc"], abs=0.02
    )
    assert sketched["validation"]["roc_auc"] != exact["validation"]["roc_auc"]
    for label, curve in sketched["diagnostics"]["roc"].items():
        assert curve["auc"] == pytest.approx(exact["diagnostics"]["roc"][label]["auc"], abs=0.02)
        assert (curve["fpr"][0], curve["tpr"][0], curve["fpr"][-1], curve["tpr"][-1]) == (
            0.0,
            0.0,
            1.0,
            1.0,
        )


def test_an_out_of_core_job_opens_parts_only_in_worker_processes(
    client: Any, tmp_path: Path
) -> None:
    """The whole job (first pass, edges, fit, metrics) with the table in parts: every Parquet
    open is logged with its pid, and none is this (the fit) process's. Each part is opened
    once for the first pass, then three times by each worker holding rows of it (targets,
    the edges' sample, codes)."""
    from engine.parallel._parts import deal_rows
    from service.training import TrainingSpec, run_training

    _, table = _stored(tmp_path)
    store, records, kinds = table.store, table.parts, table.kinds
    spec = TrainingSpec(
        method="xgboost",
        task="classification",
        target="label",
        features=FEATURES,
        params={"n_estimators": 4, "max_depth": 3},
        validation={"holdout": 0.2},
        seed=5,
    )
    log = tmp_path / "opens.log"
    workers = set(client.run(os.getpid).values())
    client.run(log_opens, str(log))
    log_opens(str(log))
    try:
        import engine

        with engine.parallel_backend(client):
            outcome = run_training(spec, table, lambda f, s: None, lambda: False)
    finally:
        log_opens(None)
        client.run(log_opens, None)
    pids = [int(line) for line in log.read_text().split()]
    assert os.getpid() not in pids
    assert set(pids) <= workers
    assert table.parts_read == 0
    dealt = deal_rows(worker_parts(store, records, FEATURES, "label", kinds, {}), len(workers))
    assert len(pids) == len(records) + 3 * sum(len(group) for group in dealt)
    assert outcome.metrics["validation"] is not None
    assert outcome.metrics["monitoring"] is not None


@pytest.mark.parametrize(
    ("task", "target", "validation"),
    [
        ("classification", "label", {"holdout": 0.2}),
        ("regression", "amount", {"holdout": 0.25}),  # quantiles by bisection, residual rows
    ],
)
def test_a_worker_killed_while_the_metrics_are_made_is_replaced_and_they_are_the_same(
    client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    task: str,
    target: str,
    validation: dict[str, Any],
) -> None:
    """SIGKILL a worker holding rows after the workers' metric sums (training and held-out
    rows), before the next call reads what they kept (``KeptRows.evaluate``): a new actor reads its rows (and their holdout tags) again
    and replays the trees, the evaluation starts over, and the metrics are the undisturbed
    run's; nothing hangs (the nanny restarts the worker)."""
    import signal
    import time

    import engine
    from engine.parallel import _dask_parts
    from service.training import TrainingSpec, run_training

    _, table = _stored(tmp_path)
    spec = TrainingSpec(
        method="xgboost",
        task=task,
        target=target,
        features=FEATURES,
        params={"n_estimators": 5, "max_depth": 4},
        validation=validation,
        seed=11,
    )
    with engine.parallel_backend(client):
        undisturbed = run_training(spec, table, lambda f, s: None, lambda: False)
    client.wait_for_workers(2, timeout=120)
    pid_of = client.run(os.getpid)
    victim = pid_of[min(pid_of)]
    replaced: list[list[int]] = []
    calls: list[str] = []
    replace, each = _dask_parts.DaskPartitions.replace, _dask_parts.ActorCalls.each

    def counted_replace(self: Any, lost: Any, replay: Any) -> None:
        replaced.append(list(lost))
        replace(self, lost, replay)

    def kill_at_third_call(self: Any, function: Any, *args: Any) -> Any:
        calls.append(function.__name__)
        if len(calls) == 3:
            os.kill(victim, signal.SIGKILL)
        return each(self, function, *args)

    monkeypatch.setattr(_dask_parts.DaskPartitions, "replace", counted_replace)
    monkeypatch.setattr(_dask_parts.ActorCalls, "each", kill_at_third_call)
    start = time.monotonic()
    with engine.parallel_backend(client):
        disturbed = run_training(spec, table, lambda f, s: None, lambda: False)
    assert time.monotonic() - start < 300
    # One loss, and the evaluation started over on the new actors: its sums made again.
    assert len(replaced) == 1, replaced
    assert calls[:2] == calls[3:5] == ["_sums", "_sums"], calls
    assert disturbed.metrics == undisturbed.metrics
    assert disturbed.n_validation_rows == undisturbed.n_validation_rows
    client.wait_for_workers(2, timeout=120)


@pytest.mark.parametrize(
    ("task", "target", "validation"),
    [
        ("classification", "label", {"holdout": 0.2}),
        ("regression", "amount", {"holdout": 0.25}),
        ("classification", "label", {"folds": 3}),
    ],
)
def test_run_training_on_a_cluster_fits_a_random_forest_out_of_core(
    client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    task: str,
    target: str,
    validation: dict[str, Any],
) -> None:
    """A random_forest job on a cluster grows its trees from the workers' rows (engine.
    ensemble._forest_parts): the outcome is the in-memory run's. Out-of-bag estimates are
    not turned on unasked for a fit out of core (they need every row's votes in one place);
    the in-memory run is asked not to make them, to compare like with like."""
    import engine
    from engine.ensemble._forest import BaseForest
    from service.training import TrainingSpec, run_training

    fitted: list[int] = []
    original = BaseForest.fit_parts

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        fitted.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseForest, "fit_parts", counted)
    columns, table = _stored(tmp_path)
    params = {"n_estimators": 6, "max_depth": 4}
    spec = TrainingSpec(
        method="random_forest",
        task=task,
        target=target,
        features=FEATURES,
        params=params,
        validation=validation,
        seed=7,
    )
    with engine.parallel_backend(client):
        from_parts = run_training(spec, table, lambda f, s: None, lambda: False)
    assert len(fitted) == (3 + 1 if "folds" in validation else 1)
    assert from_parts.metrics["oob"] is None
    asked = dataclasses.replace(spec, params={**params, "oob_score": False})
    in_memory = run_training(asked, columns, lambda f, s: None, lambda: False)
    _approx(from_parts.metrics, in_memory.metrics)
    _approx(from_parts.importances, in_memory.importances)
    assert from_parts.encoding == in_memory.encoding
    X = np.column_stack([columns[name].as_float() for name in FEATURES])
    remote, local = engine.load_model(from_parts.artifact), engine.load_model(in_memory.artifact)
    if task == "classification":
        np.testing.assert_array_equal(remote.classes_, local.classes_)
        np.testing.assert_allclose(
            remote.predict_proba(X), local.predict_proba(X), rtol=0, atol=1e-12
        )
    else:
        np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)


def test_forests_hold_the_table_on_the_workers_unless_their_settings_need_it_here() -> None:
    """The API's memory estimate and the run agree: a random_forest or extra_trees job on a
    cluster keeps its table on the workers, unless asked for what needs every row here."""
    from service.methods.catalog import Task
    from service.methods.params import resolve_params
    from service.training.run import table_holding

    holdout = {"holdout": 0.2}
    for method in ("random_forest", "extra_trees"):
        resolved = resolve_params(method, Task.CLASSIFICATION, {})
        assert table_holding(method, Task.CLASSIFICATION, resolved, True, holdout) == "workers"
        assert table_holding(method, Task.CLASSIFICATION, resolved, True, {"folds": 3}) == (
            "cluster"
        )
        assert table_holding(method, Task.CLASSIFICATION, resolved, False, holdout) == "codes"
    asked = resolve_params("random_forest", Task.REGRESSION, {"oob_score": True})
    assert table_holding("random_forest", Task.REGRESSION, asked, True, holdout) == "codes"
