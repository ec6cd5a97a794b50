"""``n_jobs`` of the boosting models: threads inside each tree, the same model for any count,
and nothing left behind that makes a later fork unsafe."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import numpy as np
import pytest

import engine
from engine.parallel import default_start_method
from engine.tree.predict.packing import MIN_ROWS_PER_THREAD


def data(n: int = 3_000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.03] = np.nan
    y = (np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) ** 2 > -0.5).astype(int)
    return X, y


BOOSTERS = [
    lambda n_jobs: engine.XGBoostClassifier(
        n_estimators=6, max_depth=4, random_state=0, n_jobs=n_jobs
    ),
    lambda n_jobs: engine.GradientBoostingClassifier(
        n_estimators=6, max_depth=3, random_state=0, n_jobs=n_jobs
    ),
    lambda n_jobs: engine.AdaBoostClassifier(n_estimators=8, random_state=0, n_jobs=n_jobs),
    lambda n_jobs: engine.ArcX4Classifier(
        engine.DecisionTreeClassifier(max_depth=3),
        n_estimators=5,
        boosting_mode="reweight",
        random_state=0,
        n_jobs=n_jobs,
    ),
    lambda n_jobs: engine.RegionBoostClassifier(n_estimators=5, random_state=0, n_jobs=n_jobs),
    lambda n_jobs: engine.AdaBoostRegressor(n_estimators=5, random_state=0, n_jobs=n_jobs),
]
NAMES = ["xgboost", "gradient_boosting", "adaboost", "arc_x4", "regionboost", "adaboost_r2"]


def _output(model: Any, X: np.ndarray) -> np.ndarray:
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


@pytest.mark.parametrize("make", BOOSTERS, ids=NAMES)
def test_any_number_of_threads_gives_the_same_model(make: Any) -> None:
    # Threads an earlier test left in this process (AnyIO keeps idle worker threads for some
    # seconds after a service test, which a pytest-xdist worker may have run) are not the fit's.
    before = set(threading.enumerate())
    X, y = data()
    serial = make(1).fit(X, y)
    threaded = make(2).fit(X, y)
    all_cpus = make(-1).fit(X, y)
    for model in (threaded, all_cpus):
        np.testing.assert_array_equal(_output(model, X), _output(serial, X))
    # Threads end with the fit, so the engine's process pools may still fork.
    assert set(threading.enumerate()) <= before
    if before == {threading.main_thread()}:
        assert default_start_method() == "fork"


def _fit_in_child(queue: Any) -> None:
    X, y = data(1_000)
    booster = engine.XGBoostClassifier(n_estimators=3, random_state=0, n_jobs=2).fit(X, y)
    forest = engine.RandomForestClassifier(n_estimators=4, random_state=0, n_jobs=2).fit(
        np.nan_to_num(X), y
    )
    queue.put((booster.predict(X[:5]).tolist(), forest.predict(np.nan_to_num(X[:5])).tolist()))


def test_a_process_forked_after_threaded_kernels_ran_fits_again() -> None:
    X, y = data(1_000)
    engine.XGBoostClassifier(n_estimators=3, random_state=0, n_jobs=2).fit(X, y)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fit_in_child, args=(queue,))
    child.start()
    booster, forest = queue.get(timeout=240)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert len(booster) == len(forest) == 5


@pytest.mark.parametrize("make", BOOSTERS[:2], ids=NAMES[:2])
def test_threads_share_a_large_batch_s_rows_with_the_same_result(make: Any) -> None:
    # A batch past two threads' worth of rows is split among threads; each row's sum over
    # the trees is the same to the last bit whichever thread adds it up.
    X, y = data(3_000)
    model = make(2).fit(X, y)
    rows = np.random.default_rng(1).normal(size=(3 * MIN_ROWS_PER_THREAD + 17, X.shape[1]))
    threaded = model.predict_proba(rows)
    model.set_params(n_jobs=1)
    np.testing.assert_array_equal(threaded, model.predict_proba(rows))
