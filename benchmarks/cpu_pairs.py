"""Single-thread CPU time of the engine's tree models beside their peers, paired in one process.

On a shared machine, wall times of multi-threaded fits swing with other people's load (OpenMP
libraries worst: their threads spin while the cores are taken). The CPU time a single-threaded
fit uses moves far less, so this script fits every library with one thread, alternately, and
reports medians of the per-round ratios. It complements ``benchmarks.run`` (fresh processes,
``n_jobs=2``, memory), it does not replace it.

    python -m benchmarks.cpu_pairs [--trees 20] [--repeats 2] [--only rf,et,bag,xgb,gb,ada]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

Factory = Callable[[int], Any]


def _lightgbm() -> Any:
    # Imported when its pair runs, so the other pairs run where LightGBM is not installed.
    import lightgbm

    return lightgbm


def _pairs() -> dict[str, list[tuple[str, Factory]]]:
    from sklearn import ensemble as sk

    import engine

    return {
        "rf": [
            ("coppice", lambda t: engine.RandomForestClassifier(t, max_features="sqrt", n_jobs=1)),
            ("scikit-learn", lambda t: sk.RandomForestClassifier(t, max_features="sqrt", n_jobs=1)),
        ],
        "et": [
            ("coppice", lambda t: engine.ExtraTreesClassifier(t, max_features="sqrt", n_jobs=1)),
            ("scikit-learn", lambda t: sk.ExtraTreesClassifier(t, max_features="sqrt", n_jobs=1)),
        ],
        "bag": [
            ("coppice", lambda t: engine.BaggingClassifier(n_estimators=t, n_jobs=1)),
            ("scikit-learn", lambda t: sk.BaggingClassifier(n_estimators=t, n_jobs=1)),
        ],
        "xgb": [
            ("coppice", lambda t: engine.XGBoostClassifier(t, max_depth=6, learning_rate=0.1)),
            (
                "lightgbm",
                lambda t: _lightgbm().LGBMClassifier(
                    n_estimators=t,
                    max_depth=6,
                    num_leaves=64,
                    learning_rate=0.1,
                    reg_lambda=1,
                    min_child_weight=1,
                    min_child_samples=1,
                    max_bin=255,
                    n_jobs=1,
                    verbose=-1,
                ),
            ),
            (
                "scikit-learn-hist",
                lambda t: sk.HistGradientBoostingClassifier(
                    max_iter=t,
                    max_depth=6,
                    max_leaf_nodes=None,
                    l2_regularization=1,
                    early_stopping=False,
                ),
            ),
        ],
        "gb": [
            ("coppice", lambda t: engine.GradientBoostingClassifier(n_estimators=t, max_depth=3)),
            (
                "scikit-learn-hist",
                lambda t: sk.HistGradientBoostingClassifier(
                    max_iter=t, max_depth=3, max_leaf_nodes=None, early_stopping=False
                ),
            ),
        ],
        "ada": [
            ("coppice", lambda t: engine.AdaBoostClassifier(n_estimators=2 * t)),
            ("scikit-learn", lambda t: sk.AdaBoostClassifier(n_estimators=2 * t)),
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", default="rf,et,xgb,gb,ada")
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    from engine.warmup import warm_kernels

    print(f"engine kernels loaded in {warm_kernels():.1f} s", flush=True)
    X, y = make_classification(100_000, 40, n_informative=20, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    pairs = _pairs()
    with threadpool_limits(1):
        for name in args.only.split(","):
            cpu: dict[str, list[float]] = {library: [] for library, _ in pairs[name]}
            for round_index in range(args.repeats):
                for library, factory in pairs[name]:
                    model = factory(args.trees).set_params(random_state=0)
                    started, wall = time.process_time(), time.perf_counter()
                    model.fit(X_train, y_train)
                    cpu_s = time.process_time() - started
                    wall_s = time.perf_counter() - wall
                    accuracy = float((model.predict(X_test) == y_test).mean())
                    cpu[library].append(cpu_s)
                    print(
                        f"{name} round {round_index + 1} {library}: CPU {cpu_s:.2f} s, "
                        f"wall {wall_s:.2f} s, accuracy {accuracy:.4f}",
                        flush=True,
                    )
            ours = np.array(cpu["coppice"])
            for library, times in cpu.items():
                if library != "coppice":
                    ratio = float(np.median(ours / np.array(times)))
                    print(f"{name}: coppice / {library} CPU time, median ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
