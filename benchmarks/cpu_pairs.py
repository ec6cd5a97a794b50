"""Single-thread CPU time of the engine's tree models beside their peers, paired in one process.

On a shared machine, wall times of multi-threaded fits swing with other people's load (OpenMP
libraries worst: their threads spin while the cores are taken). The CPU time a single-threaded
fit uses moves far less, so this script fits every library with one thread, alternately, and
reports medians of the per-round ratios. It complements ``benchmarks.run`` (fresh processes,
``n_jobs=2``, memory), it does not replace it.

    python -m benchmarks.cpu_pairs [--trees 20] [--repeats 2] [--only rf,et,bag,xgb,gb,gb-exact,ada]
                                   [--datasets binary,friedman1,multiclass5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Factory = Callable[[int], Any]

# LightGBM set to grow the trees XGBoost-style boosting grows (depth 6, λ = 1, 255 bins).
LIGHTGBM_PARAMS: dict[str, Any] = {
    "max_depth": 6,
    "num_leaves": 64,
    "learning_rate": 0.1,
    "reg_lambda": 1,
    "min_child_weight": 1,
    "min_child_samples": 1,
    "max_bin": 255,
    "verbose": -1,
}


def _lightgbm() -> Any:
    # Imported when its pair runs, so the other pairs run where LightGBM is not installed.
    import lightgbm

    return lightgbm


def _pairs(regression: bool) -> dict[str, list[tuple[str, Factory]]]:
    """The models compared, by short name: the engine's first, then its peers."""
    from sklearn import ensemble as sk

    import engine

    kind = "Regressor" if regression else "Classifier"

    def ours(name: str) -> Any:
        return getattr(engine, f"{name}{kind}")

    def theirs(name: str) -> Any:
        return getattr(sk, f"{name}{kind}")

    lightgbm_params = {**LIGHTGBM_PARAMS, "n_jobs": 1}
    return {
        "rf": [
            ("coppice", lambda t: ours("RandomForest")(t, max_features="sqrt", n_jobs=1)),
            ("scikit-learn", lambda t: theirs("RandomForest")(t, max_features="sqrt", n_jobs=1)),
        ],
        "et": [
            ("coppice", lambda t: ours("ExtraTrees")(t, max_features="sqrt", n_jobs=1)),
            ("scikit-learn", lambda t: theirs("ExtraTrees")(t, max_features="sqrt", n_jobs=1)),
        ],
        "bag": [
            ("coppice", lambda t: ours("Bagging")(n_estimators=t, n_jobs=1)),
            ("scikit-learn", lambda t: theirs("Bagging")(n_estimators=t, n_jobs=1)),
        ],
        "xgb": [
            ("coppice", lambda t: ours("XGBoost")(t, max_depth=6, learning_rate=0.1)),
            (
                "lightgbm",
                lambda t: getattr(_lightgbm(), f"LGBM{kind}")(n_estimators=t, **lightgbm_params),
            ),
            (
                "scikit-learn-hist",
                lambda t: theirs("HistGradientBoosting")(
                    max_iter=t,
                    max_depth=6,
                    max_leaf_nodes=None,
                    l2_regularization=1,
                    early_stopping=False,
                ),
            ),
        ],
        "gb": [
            ("coppice", lambda t: ours("GradientBoosting")(n_estimators=t, max_depth=3)),
            (
                "scikit-learn-hist",
                lambda t: theirs("HistGradientBoosting")(
                    max_iter=t, max_depth=3, max_leaf_nodes=None, early_stopping=False
                ),
            ),
        ],
        # scikit-learn's exact (sorting) gradient boosting, the other peer: minutes.
        "gb-exact": [
            ("coppice", lambda t: ours("GradientBoosting")(n_estimators=t, max_depth=3)),
            ("scikit-learn", lambda t: theirs("GradientBoosting")(n_estimators=t, max_depth=3)),
        ],
        "ada": [
            ("coppice", lambda t: ours("AdaBoost")(n_estimators=2 * t)),
            ("scikit-learn", lambda t: theirs("AdaBoost")(n_estimators=2 * t)),
        ],
    }


def _split(dataset: str) -> tuple[Any, Any, Any, Any, bool]:
    """The benchmark suite's dataset (``benchmarks.datasets``), split as the harness splits it."""
    from sklearn.model_selection import train_test_split

    from benchmarks.datasets import DATASETS, SPLIT_SEED, _generate

    spec = next(spec for spec in DATASETS if spec.name == dataset)
    X, y = _generate(spec)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=spec.test_fraction, random_state=SPLIT_SEED
    )
    return X_train, X_test, y_train, y_test, spec.task == "regression"


def _score(model: Any, X: Any, y: Any, regression: bool) -> str:
    predicted = model.predict(X)
    if regression:
        return f"RMSE {float(np.sqrt(np.mean((predicted - y) ** 2))):.4f}"
    return f"accuracy {float((predicted == y).mean()):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", default="rf,et,xgb,gb,ada")
    parser.add_argument(
        "--datasets",
        default="binary",
        help="comma-separated names from benchmarks.datasets (binary, friedman1, multiclass5)",
    )
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    from engine.warmup import warm_kernels

    print(f"engine kernels loaded in {warm_kernels():.1f} s", flush=True)
    for dataset in args.datasets.split(","):
        X_train, X_test, y_train, y_test, regression = _split(dataset)
        pairs = _pairs(regression)
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
                        cpu[library].append(cpu_s)
                        print(
                            f"{dataset} {name} round {round_index + 1} {library}: "
                            f"CPU {cpu_s:.2f} s, wall {wall_s:.2f} s, "
                            f"{_score(model, X_test, y_test, regression)}",
                            flush=True,
                        )
                ours = np.array(cpu["coppice"])
                for library, times in cpu.items():
                    if library != "coppice":
                        ratio = float(np.median(ours / np.array(times)))
                        print(
                            f"{dataset} {name}: coppice / {library} CPU time, "
                            f"median ratio {ratio:.3f}",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
