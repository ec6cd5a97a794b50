"""A 20,000-row predict of the XGBoost-style model beside XGBoost's, in one process.

Issue 12's target for boosted models: predicting the 20,000 test rows of ``binary`` with 100
trees of depth 6 in at most XGBoost's time. Both models are fitted once on the 80,000
training rows (learning rate 0.1, ``random_state=0``); then each round times
``predict_proba`` of the test rows by each library in turn, with one thread (CPU time) and
two (wall time), and one-row predicts. Medians over rounds.

    python -m benchmarks.boosted_predict [--rounds 9]

XGBoost's OpenMP threads spin for a while after each parallel region, and in one process that
spinning is counted in the next measurement's CPU time and takes a core from its threads: the
engine's single-thread predict measured 24 ms of CPU right after XGBoost's, 14.5 ms alone. So
the OpenMP threads are told to sleep when idle (``OMP_WAIT_POLICY=PASSIVE``, set before
XGBoost loads), as they would between a server's requests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.datasets import DATASETS, load_dataset, write_dataset

TREES, DEPTH, RATE = 100, 6, 0.1


def _models(X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    import xgboost

    import engine

    ours = engine.XGBoostClassifier(
        TREES, max_depth=DEPTH, learning_rate=RATE, random_state=0, n_jobs=2
    ).fit(X, y)
    theirs = xgboost.XGBClassifier(
        n_estimators=TREES,
        max_depth=DEPTH,
        learning_rate=RATE,
        tree_method="hist",
        max_bin=256,
        random_state=0,
        n_jobs=2,
    ).fit(X, y)
    return {"coppice": ours, "xgboost": theirs}


def _with_threads(model: Any, n_jobs: int) -> Any:
    model.set_params(n_jobs=n_jobs)
    return model


def _cpu_ms(function: Callable[[], Any]) -> float:
    start = time.process_time()
    function()
    return 1000 * (time.process_time() - start)


def _wall_ms(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return 1000 * (time.perf_counter() - start)


def _round(model: Any, X: np.ndarray, row: np.ndarray, one_row_calls: int) -> dict[str, float]:
    """One round's figures for one model: 20,000 rows on one and two threads, one row."""
    predict = model.predict_proba
    _with_threads(model, 1)
    one_thread = _cpu_ms(lambda: predict(X))
    _with_threads(model, 2)
    two_threads = _wall_ms(lambda: predict(X))
    one_row = _wall_ms(lambda: [predict(row) for _ in range(one_row_calls)]) / one_row_calls
    return {
        "1 thread CPU ms": one_thread,
        "2 threads wall ms": two_threads,
        "one row ms": one_row,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--one-row-calls", type=int, default=500)
    args = parser.parse_args()

    from engine.warmup import warm_kernels

    warm_kernels()
    with tempfile.TemporaryDirectory() as directory:
        data = load_dataset(write_dataset(DATASETS[0], Path(directory)))
    models = _models(data.X_train, data.y_train)
    X, row = data.X_test, data.X_test[:1]
    same = np.abs(models["coppice"].predict_proba(X) - models["xgboost"].predict_proba(X))
    print(f"largest probability difference between the two models: {same.max():.3g}")
    figures: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, model in models.items():
            for label, seconds in _round(model, X, row, args.one_row_calls).items():
                figures.setdefault(f"{name} {label}", []).append(seconds)
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in median.items():
        print(f"  {name:28s} {value:8.3f}")
    for kind in ("1 thread CPU ms", "2 threads wall ms", "one row ms"):
        ratio = median[f"coppice {kind}"] / median[f"xgboost {kind}"]
        print(f"  coppice / xgboost, {kind}: {ratio:.2f}x (target <= 1.0x for 20,000 rows)")


if __name__ == "__main__":
    main()
