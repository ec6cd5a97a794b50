"""How long explanations take: sampled (one row of a 30-feature stacking model) and exact
(explain against predict on the same rows).

    python -m benchmarks.explain [--repeats N]

Targets (issue 18): one row of a 30-feature stacking model explained in at most 100 ms at the
default sample count; exact explanations within 3x the time of ``predict``. The stacking model
is the service's default ``stacking`` (a 100-tree forest, gradient boosting and logistic
regression under a logistic final estimator, 5 folds), whose gradient-boosting and logistic
members are not additive in probability, so it is sampled. Times are medians of ``--repeats``
calls, CPU time of this process (steadier than wall time on a shared machine) beside wall time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import engine
from engine import explain
from engine.explain import DEFAULT_PERMUTATIONS

N_FEATURES = 30


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES))
    score = X[:, 0] + X[:, 1] * X[:, 2] - 0.5 * X[:, 3] + 0.2 * X[:, 4:].sum(axis=1)
    return X, (score > 0).astype(int), score


def _median(call: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median (CPU, wall) seconds of ``call``, after one warm-up call."""
    call()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        call()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def _stacking() -> Any:
    def logistic() -> Any:
        return engine.EncodedClassifier(engine.LogisticRegression())

    return engine.StackingClassifier(
        [
            ("forest", engine.RandomForestClassifier(n_estimators=100, random_state=0)),
            ("boosting", engine.GradientBoostingClassifier(random_state=0)),
            ("logistic", logistic()),
        ],
        final_estimator=logistic(),
        random_state=0,
    )


def _exact_models() -> dict[str, Callable[[], Any]]:
    tree = engine.DecisionTreeClassifier
    return {
        "logistic_regression (encoded)": lambda: engine.EncodedClassifier(
            engine.LogisticRegression()
        ),
        "linear_regression (encoded)": lambda: engine.EncodedRegressor(engine.LinearRegression()),
        "gaussian_nb (encoded)": lambda: engine.EncodedClassifier(engine.GaussianNB()),
        "adaboost (50 stumps)": lambda: engine.AdaBoostClassifier(random_state=0),
        "arc_x4 (10 trees)": lambda: engine.ArcX4Classifier(n_estimators=10, random_state=0),
        "voting soft (forest 20 + tree)": lambda: engine.VotingClassifier(
            [
                ("forest", engine.RandomForestClassifier(n_estimators=20, random_state=0)),
                ("tree", tree(max_depth=6, random_state=0)),
            ],
            voting="soft",
        ),
        "decision_tree (depth 6)": lambda: tree(max_depth=6, random_state=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    X, y, score = _data(2000)
    rows = X[:1]

    model = _stacking().fit(X, y)
    cpu, wall = _median(lambda: explain(model, rows), args.repeats)
    predict_cpu, _ = _median(lambda: model.predict_proba(rows), args.repeats)
    print(f"stacking, 30 features, 1 row, {DEFAULT_PERMUTATIONS} permutations (sampled):")
    print(f"  explain {cpu * 1e3:.1f} ms CPU ({wall * 1e3:.1f} ms wall); target <= 100 ms")
    print(f"  predict_proba of 1 row {predict_cpu * 1e3:.2f} ms CPU")
    print()
    print("exact explanations against predict (CPU ms, medians):")
    print("| model | rows | predict | explain | ratio |")
    print("|---|---|---|---|---|")
    for name, make in _exact_models().items():
        target = score if "regression" in name and "logistic" not in name else y
        fitted = make().fit(X, target)
        predict = fitted.predict_proba if hasattr(fitted, "predict_proba") else fitted.predict
        for n_rows in (1, 1000):
            batch = X[:n_rows]
            explanation = explain(fitted, batch)
            assert explanation.method == "exact", name
            p, _ = _median(lambda b=batch, f=predict: f(b), args.repeats)
            e, _ = _median(lambda b=batch, m=fitted: explain(m, b), args.repeats)
            print(f"| {name} | {n_rows} | {p * 1e3:.3f} | {e * 1e3:.3f} | {e / p:.1f}x |")


if __name__ == "__main__":
    main()
