"""Load (or compile) the engine's kernels before a process forks workers.

Numba compiles a kernel at its first call and caches the machine code on disk, so a new
process only loads it — but loading still costs: Numba's own start-up (1–3 s the first time
a process calls any kernel) and each kernel's deserialisation. A process that forks workers
(the service's fork server, a forest's parent process) pays that once here, and every child
inherits the loaded kernels instead of paying it again.

``python -m engine.warmup`` compiles every kernel into the cache; the Docker image runs it at
build time (with ``NUMBA_CACHE_DIR`` set, as the installed package is read-only there).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from engine._kernels import compiled_kernels

__all__ = ["warm_kernels"]


def _fit_small_models() -> None:
    # Every kernel signature the estimators use: classification (class channels, two and
    # more classes), regression, Newton channels, random cuts, categorical features,
    # missing values, wide (uint16) codes, threads, and prediction through packed trees.
    from engine import (
        AdaBoostClassifier,
        DecisionTreeClassifier,
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
        XGBoostClassifier,
        XGBoostRegressor,
    )

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 3] = rng.integers(0, 4, 300)
    X[rng.random(X.shape) < 0.05] = np.nan
    two = (np.nan_to_num(X[:, 0]) > 0).astype(int)
    three = np.digitize(np.nan_to_num(X[:, 1]), [-0.5, 0.5])
    value = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1])
    categorical = [3]
    models: list[tuple[Any, np.ndarray]] = [
        (RandomForestClassifier(n_estimators=2, categorical_features=categorical), two),
        (RandomForestClassifier(n_estimators=2), three),
        (RandomForestRegressor(n_estimators=2), value),
        (ExtraTreesClassifier(n_estimators=2), three),
        (ExtraTreesRegressor(n_estimators=2), value),
        # Best-first random cuts search rows without the level-wise grower's channel order.
        (ExtraTreesClassifier(n_estimators=2, max_leaf_nodes=6), two),
        (DecisionTreeClassifier(max_leaf_nodes=4), two),
        (XGBoostClassifier(n_estimators=2, n_jobs=2, categorical_features=categorical), two),
        (XGBoostClassifier(n_estimators=2), three),
        (XGBoostRegressor(n_estimators=2, tree_method="exact"), value),
        (GradientBoostingRegressor(n_estimators=2, n_jobs=2), value),
        (AdaBoostClassifier(n_estimators=2), three),  # a stump is perfect on `two`
    ]
    for model, target in models:
        model.set_params(random_state=0).fit(X, target).predict(X[:3])
    # Exact explanations (TreeSHAP) run kernels of their own: compiled at a server's first
    # `explain` request otherwise, seconds on a busy machine.
    from engine.explain import explain

    for model, _ in models[:3] + models[6:7]:
        explain(model, X[:3])
    # Column-major input (a table assembled column by column, as the service's is) reaches the
    # binning and traversal kernels as another array layout, hence another compilation.
    columns = np.asfortranarray(X)
    for model, target in models[:3] + models[6:7]:
        model.fit(columns, target).predict(columns[:3])
    _fit_read_only_and_in_processes(X, two, three, value)


def _fit_read_only_and_in_processes(
    X: np.ndarray, two: np.ndarray, three: np.ndarray, value: np.ndarray
) -> None:
    # Numba types a read-only array apart from a writable one, so each is a compilation of its
    # own. Read-only arrays are common: a forest's worker processes map the binned codes from
    # shared memory read-only, Arrow hands NumPy read-only views of a table's columns, and a
    # memory-mapped file is read-only. Warming them here keeps those compilations out of the
    # first fit or predict (and out of `make test`, whose two workers would each compile them).
    from engine import (
        BaggingClassifier,
        ExtraTreesClassifier,
        ExtraTreesRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
        XGBoostClassifier,
    )

    read_only = X.copy()
    read_only.setflags(write=False)
    models: list[tuple[Any, np.ndarray]] = [
        (RandomForestClassifier(n_estimators=2, n_jobs=2), two),
        (RandomForestRegressor(n_estimators=2, n_jobs=2), value),
        (ExtraTreesClassifier(n_estimators=2, n_jobs=2), three),
        (ExtraTreesRegressor(n_estimators=2, n_jobs=2), value),
        (ExtraTreesClassifier(n_estimators=2), two),
        (RandomForestClassifier(n_estimators=2), three),
        (XGBoostClassifier(n_estimators=2), two),
        (
            BaggingClassifier(
                estimator=ExtraTreesClassifier(n_estimators=2), max_features=0.5, n_estimators=2
            ),
            two,
        ),
    ]
    for model, target in models:
        model.set_params(random_state=0).fit(read_only, target).predict(read_only[:3])
        model.predict(X[:3])
    _fit_extra_trees_on_the_level_loop(X, read_only, two, three, value)


def _fit_extra_trees_on_the_level_loop(
    X: np.ndarray, read_only: np.ndarray, two: np.ndarray, three: np.ndarray, value: np.ndarray
) -> None:
    # Extra trees grow every node of up to SUBTREE_ROWS rows depth first in one compiled call,
    # so tables as small as these never reach the level loop's kernels (the level search, the
    # row ranges), whose read-only and in-process signatures a real fit then compiled in its
    # forest's workers (a 100-tree binary benchmark fit: 11.7 s instead of 3.8 s). Grown once
    # more with every node on the level loop: the workers are forked from this process, so
    # they read the same setting.
    from engine import ExtraTreesClassifier, ExtraTreesRegressor
    from engine.tree.grow import random_levels

    saved = random_levels.SUBTREE_ROWS
    random_levels.SUBTREE_ROWS = 0
    try:
        for table in (X, read_only):
            models: list[tuple[Any, np.ndarray]] = [
                (ExtraTreesClassifier(n_estimators=2, n_jobs=2), three),
                (ExtraTreesRegressor(n_estimators=2, n_jobs=2), value),
                (ExtraTreesClassifier(n_estimators=2), two),
                (ExtraTreesRegressor(n_estimators=2), value),
            ]
            for model, target in models:
                model.set_params(random_state=0).fit(table, target).predict(table[:3])
    finally:
        random_levels.SUBTREE_ROWS = saved


@functools.cache
def warm_kernels() -> float:
    """Load every kernel into this process (once); return the seconds it took."""
    if not compiled_kernels():
        return 0.0
    start = time.perf_counter()
    _fit_small_models()
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"engine kernels ready in {warm_kernels():.1f} s")
