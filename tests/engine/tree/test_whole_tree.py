"""A boosted tree grown in one compiled call is the Python level loop's tree, to the bit.

:mod:`engine.tree.grow.whole_tree` runs the level loop of
:func:`engine.tree.grow.grower.grow_tree` inside one kernel; the loop stays as its twin. Both
run here in one process with the compiled kernels on (the loop by declining the whole-tree
call), over every task, with and without missing values and a categorical feature, on data
small enough that deep levels fall back from histograms to rows and large enough that they do
not, with subsampling, column sampling per tree and the regularisation options. The twin tests
(``test_twins_grow_alike.py``) hold the NumPy twins to the same models.
"""

from __future__ import annotations

import itertools
import os
import platform
import subprocess
import sys
from typing import Any

import numba
import numpy as np
import pytest

import engine
import engine.tree.grow.grower as grower
import engine.tree.grow.whole_tree as whole_tree
from engine._kernels import compiled_kernels
from engine._threads import parallel_kernel_threads
from engine.tree.grow.whole_tree import TreeWorkspace, grows_whole

pytestmark = pytest.mark.skipif(not compiled_kernels(), reason="the kernel is what is tested")

OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "sampled": {"max_depth": 7, "subsample": 0.7, "colsample_bytree": 0.6},
    "regularised": {"gamma": 0.5, "min_child_weight": 5, "reg_alpha": 0.3, "max_delta_step": 0.7},
    "stumps": {"max_depth": 1},
}


def _data(n: int, p: int, task: str, missing: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n + p)
    X = rng.normal(size=(n, p))
    X[:, 5] = rng.integers(0, 6, n)
    signal = X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.7 * (X[:, 5] % 3 == 1)
    if missing:
        X[rng.random(X.shape) < 0.06] = np.nan
    y = {
        "binary": (signal > 0.3).astype(int),
        "multiclass": np.digitize(signal, [-0.2, 0.8]),
        "regression": signal + 0.1 * rng.normal(size=n),
    }[task]
    return X, y


def _fit(model: Any, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    model.fit(X, y)
    out = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    return np.asarray(out)


@pytest.mark.parametrize(
    ("shape", "task", "missing", "categorical"),
    list(
        itertools.product(
            ((700, 6), (4000, 12)),
            ("binary", "multiclass", "regression"),
            (False, True),
            (False, True),
        )
    ),
)
def test_the_whole_tree_call_grows_the_level_loops_model(
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int],
    task: str,
    missing: bool,
    categorical: bool,
) -> None:
    X, y = _data(*shape, task, missing)
    cls = engine.XGBoostRegressor if task == "regression" else engine.XGBoostClassifier
    for name, options in OPTIONS.items():
        params = {"n_estimators": 4, "max_depth": 4, "random_state": 1, **options}
        if categorical:
            params["categorical_features"] = [5]
        calls: list[bool] = []

        def counted(growth: Any, calls: list[bool] = calls) -> bool:
            calls.append(grows_whole(growth))
            return calls[-1]

        monkeypatch.setattr(grower, "grows_in_one_call", counted)
        whole = _fit(cls(**params), X, y)
        assert calls and all(calls), name  # every tree took the compiled call
        # Its steps shared among two threads, every step however small.
        monkeypatch.setattr(whole_tree, "PARALLEL_MIN_WORK", 0)
        threaded = _fit(cls(n_jobs=2, **params), X, y)
        monkeypatch.setattr(grower, "grows_in_one_call", lambda growth: False)
        loop = _fit(cls(**params), X, y)
        np.testing.assert_array_equal(whole, loop, err_msg=name)
        np.testing.assert_array_equal(threaded, loop, err_msg=name)


@pytest.mark.parametrize(
    "options",
    [
        {"monotone_constraints": [1, 0, 0, 0, 0, 0]},
        {"colsample_bylevel": 0.5},
        {"colsample_bynode": 0.5},
        {"grow_policy": "lossguide", "max_leaves": 8},
        {"tree_method": "exact"},
    ],
)
def test_trees_the_kernel_does_not_cover_keep_the_level_loop(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    X, y = _data(700, 6, "regression", False)
    calls: list[bool] = []

    def counted(growth: Any) -> bool:
        calls.append(grows_whole(growth))
        return calls[-1]

    monkeypatch.setattr(grower, "grows_in_one_call", counted)
    engine.XGBoostRegressor(n_estimators=2, max_depth=3, random_state=0, **options).fit(X, y)
    assert not any(calls)


@pytest.mark.parametrize(
    ("task", "subsample"),
    [("binary", 1.0), ("multiclass", 1.0), ("multiclass", 0.7), ("regression", 0.7)],
)
def test_a_trees_steps_shared_among_threads_give_the_serial_tree(
    monkeypatch: pytest.MonkeyPatch, task: str, subsample: float
) -> None:
    """Histograms by features, searches by nodes, partitions by rows and children
    (:mod:`engine.tree.grow.thread_kernels`): deep enough that the deepest levels search
    rows, on as many threads as Numba has, or one."""
    X, y = _data(6000, 12, task, True)
    monkeypatch.setattr(whole_tree, "PARALLEL_MIN_WORK", 0)  # every step on the threads
    cls = engine.XGBoostRegressor if task == "regression" else engine.XGBoostClassifier
    params: dict[str, Any] = {"n_estimators": 3, "max_depth": 9, "subsample": subsample}
    params["random_state"] = 3
    threaded = _fit(cls(n_jobs=2, **params), X, y)
    serial = _fit(cls(n_jobs=1, **params), X, y)
    monkeypatch.setattr(grower, "grows_in_one_call", lambda growth: False)
    loop = _fit(cls(n_jobs=1, **params), X, y)
    np.testing.assert_array_equal(threaded, serial)
    np.testing.assert_array_equal(threaded, loop)


def test_a_thread_already_in_a_parallel_kernel_leaves_the_next_serial() -> None:
    """One parallel launch at a time per process (Numba's workqueue pool, where oneTBB is not
    installed, aborts on two): a second thread asking for threads meanwhile gets the serial
    kernels (the same tree) instead."""
    with parallel_kernel_threads(2) as first, parallel_kernel_threads(2) as second:
        assert second == 1
    assert first == min(2, numba.config.NUMBA_NUM_THREADS)
    with parallel_kernel_threads(1) as one:
        assert one == 1


def test_a_workspace_serves_trees_of_any_size_in_turn() -> None:
    workspace = TreeWorkspace()
    first = workspace.reserve(1000, 10, 6)
    assert workspace.reserve(500, 10, 4) is first  # smaller trees reuse the arrays
    larger = workspace.reserve(2000, 10, 6)
    assert larger["rows"].size == 2000 and larger is not first
    assert workspace.reserve(1500, 10, 8)["node_totals"].shape[0] == 2**9 - 1


_LAYER_SCRIPT = """
import numpy as np, numba, engine
rng = np.random.default_rng(0); X = rng.normal(size=(500, 4)); y = (X[:, 0] > 0).astype(int)
engine.XGBoostClassifier(n_estimators=2, n_jobs=2).fit(X, y)
from engine.tree.grow.whole_tree import _min_work
print(numba.threading_layer(), _min_work())
"""


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="oneTBB's wheels are for x86-64"
)
def test_the_pool_is_onetbb_although_pip_put_its_library_off_the_loader_path() -> None:
    """pip installs the tbb package's library into <prefix>/lib, where the loader does not
    look from a virtual environment: without the engine loading it by path, Numba would
    quietly fall back to its workqueue layer (a second thread then gains a boosting fit
    x1.13 where TBB gives x1.29)."""
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    environment.pop("LD_LIBRARY_PATH", None)
    result = subprocess.run(
        [sys.executable, "-c", _LAYER_SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["tbb", str(whole_tree.PARALLEL_MIN_WORK)]


def test_on_numbas_workqueue_a_step_must_be_larger_to_go_to_the_threads() -> None:
    """Workqueue's wakes cost more than oneTBB's (engine._kernels): where it runs (no tbb
    wheel, or chosen by NUMBA_THREADING_LAYER), a step needs WORKQUEUE_WORK_FACTOR times
    the work before it is shared."""
    environment = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    result = subprocess.run(
        [sys.executable, "-c", _LAYER_SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert result.returncode == 0, result.stderr
    expected = whole_tree.PARALLEL_MIN_WORK * whole_tree.WORKQUEUE_WORK_FACTOR
    assert result.stdout.split()[-2:] == ["workqueue", str(expected)]


def test_row_arrays_are_int32_unless_the_rows_pass_its_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half the memory of intp; a tree of more rows than int32 counts takes intp, and the
    kernel grows the same tree on either."""
    assert whole_tree.index_dtype(2**31 - 1) == np.int32
    assert whole_tree.index_dtype(2**31) == np.intp
    assert TreeWorkspace().reserve(100, 4, 3)["small_pairs"].dtype == np.int32
    X, y = _data(4000, 12, "binary", True)
    params: dict[str, Any] = {"n_estimators": 3, "max_depth": 7, "random_state": 2}
    narrow = _fit(engine.XGBoostClassifier(**params), X, y)
    monkeypatch.setattr(whole_tree, "INDEX_DTYPE", np.intp)
    wide = _fit(engine.XGBoostClassifier(**params), X, y)
    np.testing.assert_array_equal(narrow, wide)


_FORK_SCRIPT = """
import multiprocessing as mp, numpy as np, engine
import engine.tree.grow.whole_tree as wt
wt.PARALLEL_MIN_WORK = 0
rng = np.random.default_rng(0); X = rng.normal(size=(3000, 8)); y = (X[:, 0] > 0).astype(int)
fit = lambda: engine.XGBoostClassifier(n_estimators=3, n_jobs=2).fit(X, y).predict_proba(X)
first = fit()
engine.RandomForestClassifier(n_estimators=4, n_jobs=2).fit(X, y)
def child(queue):
    queue.put(fit())
context = mp.get_context("fork")
queue = context.Queue()
process = context.Process(target=child, args=(queue,))
process.start()
assert np.array_equal(queue.get(timeout=300), first)
process.join()
assert process.exitcode == 0
"""


def test_the_thread_pool_survives_forks_of_the_process_that_woke_it() -> None:
    """A process that fitted on Numba's threads then forks a forest's workers, and a forked
    child fits on threads again (a service fit process forked from one that warmed up):
    Numba's TBB and workqueue layers are fork-safe, where GNU OpenMP would abort the child."""
    result = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
