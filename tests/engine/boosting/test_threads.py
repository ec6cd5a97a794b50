"""Boosting's n_jobs: threads build each tree's histograms, and the model does not change."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import engine.tree._grower as grower
from engine import (
    AdaBoostClassifier,
    AdaBoostRegressor,
    ArcX4Classifier,
    DecisionTreeClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    XGBoostClassifier,
    XGBoostRegressor,
    parallel,
)
from engine._threads import run_in_threads, split_evenly, tree_threads


def data(n: int = 2 * grower.THREADED_HISTOGRAM_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Enough rows that the root's histograms (and the larger children's) are threaded."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 7))
    X[rng.random(X.shape) < 0.05] = np.nan
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) ** 2 + 0.5 * rng.normal(size=n)
    return X, score


def labels(score: np.ndarray) -> np.ndarray:
    return np.digitize(score, np.quantile(score, [0.33, 0.66]))  # three classes


def nodes(model: Any) -> list[np.ndarray]:
    members = model.estimators_
    if hasattr(members[0], "tree_"):  # the AdaBoost family: a list of fitted trees
        return [member.tree_.nodes for member in members]
    return [tree.nodes for stage in members for tree in stage]


def raw(model: Any, X: np.ndarray) -> np.ndarray:
    scores = getattr(model, "decision_function", model.predict)
    return np.asarray(scores(X))


@pytest.fixture
def histogram_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The distinct threads that ran histogram work during the test."""
    seen: set[int] = set()
    original = run_in_threads

    def recording(task: Any, parts: Any, pool: Any) -> None:
        def run(part: Any) -> None:
            seen.add(threading.get_ident())
            task(part)

        original(run, parts, pool)

    monkeypatch.setattr(grower, "run_in_threads", recording)
    return seen  # type: ignore[return-value]


MODELS = [
    XGBoostRegressor(n_estimators=4, max_depth=4, random_state=0),
    XGBoostClassifier(n_estimators=3, max_depth=3, subsample=0.8, random_state=0),
    GradientBoostingRegressor(n_estimators=4, max_depth=3, random_state=0),
    GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0),
    AdaBoostClassifier(n_estimators=4, random_state=0),
    AdaBoostRegressor(n_estimators=3, boosting_mode="reweight", random_state=0),
    ArcX4Classifier(DecisionTreeClassifier(max_depth=2), n_estimators=3, random_state=0),
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_every_thread_count_grows_the_same_trees(model: Any, histogram_threads: Any) -> None:
    X, score = data()
    y = labels(score) if "Classifier" in type(model).__name__ else score
    serial = model.set_params(n_jobs=1).fit(X, y)
    serial_nodes, serial_raw = nodes(serial), raw(serial, X)
    assert len(histogram_threads) == 1  # one thread: the caller's

    histogram_threads.clear()
    threaded = model.set_params(n_jobs=3).fit(X, y)
    assert len(histogram_threads) > 1, "the histograms were not built on several threads"
    for ours, theirs in zip(nodes(threaded), serial_nodes, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(raw(threaded, X), serial_raw)


def test_small_batches_stay_on_the_calling_thread(histogram_threads: Any) -> None:
    X, score = data(grower.THREADED_HISTOGRAM_ROWS // 2)
    XGBoostRegressor(n_estimators=2, max_depth=3, n_jobs=2).fit(X, score)
    assert histogram_threads == {threading.get_ident()}


def test_n_jobs_is_checked_and_saved_models_without_it_load() -> None:
    with pytest.raises(ValueError, match="n_jobs"):
        XGBoostRegressor(n_jobs=0).fit(*data(100))
    for legacy in (GradientBoostingRegressor(n_estimators=2), AdaBoostRegressor(n_estimators=2)):
        del legacy.n_jobs  # as a model saved before the parameter existed loads
        assert legacy.n_jobs is None
        legacy.fit(*data(100))


def test_split_evenly_covers_every_item_once() -> None:
    for n_items in range(0, 12):
        for n_parts in range(1, 5):
            parts = split_evenly(n_items, n_parts)
            assert [i for part in parts for i in part] == list(range(n_items))
            assert len(parts) == max(1, min(n_parts, n_items))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_a_failing_part_raises_in_the_caller() -> None:
    def task(part: range) -> None:
        if 5 in part:
            raise RuntimeError("part with 5 failed")

    with tree_threads(3) as pool, pytest.raises(RuntimeError, match="part with 5"):
        run_in_threads(task, split_evenly(10, 3), pool)


def test_no_thread_outlives_a_fit() -> None:
    """Idle threads left behind would make engine.parallel fork forests' workers from a fork
    server, which a script without a ``__main__`` guard cannot use."""
    before = threading.active_count()
    XGBoostRegressor(n_estimators=2, max_depth=3, n_jobs=2).fit(*data())
    assert threading.active_count() == before
    assert parallel.default_start_method() == "fork" or before > 1
