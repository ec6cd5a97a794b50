"""What exporting a model to ONNX costs, and how onnxruntime's predict compares.

    python -m benchmarks.export [--trees 500] [--rows 5000] [--repeats 3]

Targets (issue 25): a 500-tree forest exports in under 2 s, and the ONNX file is at most 1.5x
the Coppice artifact (``engine.save_model``'s bytes, what the service stores). Beside them,
for users choosing where to serve, onnxruntime's predict of 20,000 rows against the engine's
in-process ``predict_proba``/``predict`` on the same rows (a figure, not a target).

The forests are fitted on a synthetic table of 8 numeric features (10% missing) and 2
categorical ones (12 and 5 categories, some missing), full depth, as the service trains them
(``n_jobs=2``). Export is timed as the endpoint runs it (``service.export.families.to_onnx``:
graph, checker) plus serialisation; times are medians of ``--repeats``, wall and this
process's CPU time (export is single-threaded, so on a loaded machine CPU time is the steadier
figure).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import engine
from service.export.families import to_onnx
from service.models.cache import LoadedModel

N_NUMERIC = 8
CATEGORY_COUNTS = (12, 5)
PREDICT_ROWS = 20_000


def _table(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, N_NUMERIC))
    cats = [rng.integers(0, k, size=n).astype(np.float64) for k in CATEGORY_COUNTS]
    score = numeric[:, 0] + numeric[:, 1] * numeric[:, 2] + np.isin(cats[0], [1, 4, 7, 9]) - 0.5
    numeric[rng.random(numeric.shape) < 0.1] = np.nan
    for column in cats:
        column[rng.random(n) < 0.05] = np.nan
    X = np.column_stack([numeric, *cats])
    return X, (score + 0.5 * rng.normal(size=n) > 0).astype(np.int64), score


def _loaded(estimator: Any, task: str, classes: list[str] | None) -> LoadedModel:
    names = [f"n{i}" for i in range(N_NUMERIC)] + [f"c{i}" for i in range(len(CATEGORY_COUNTS))]
    categories = {f"c{i}": [f"k{j}" for j in range(k)] for i, k in enumerate(CATEGORY_COUNTS)}
    features = [
        {"name": name, "kind": "categorical" if name in categories else "numeric"} for name in names
    ]
    return LoadedModel(
        id="bench",
        method="random_forest",
        task=task,
        target="y",
        estimator=estimator,
        features=features,
        encoding={"categories": categories},
        classes=classes,
        size_bytes=0,
    )


def _median(call: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Median (wall, CPU of this process) seconds of ``call``, and its last result."""
    result = None
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        result = call()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), result


def _inputs(X: np.ndarray) -> dict[str, np.ndarray]:
    inputs: dict[str, np.ndarray] = {}
    for i in range(N_NUMERIC):
        inputs[f"n{i}"] = X[:, i : i + 1].copy()
    for j in range(len(CATEGORY_COUNTS)):
        codes = X[:, N_NUMERIC + j]
        inputs[f"c{j}"] = np.array(
            [["" if np.isnan(c) else f"k{int(c)}"] for c in codes], dtype=object
        )
    return inputs


def run(trees: int, rows: int, repeats: int) -> list[dict[str, Any]]:
    import onnxruntime as ort  # bench/dev only

    X, y_class, y_value = _table(rows, 0)
    X_new, _, _ = _table(PREDICT_ROWS, 1)
    categorical = list(range(N_NUMERIC, N_NUMERIC + len(CATEGORY_COUNTS)))
    cases = [
        (
            "classification (2 classes)",
            engine.RandomForestClassifier(
                n_estimators=trees, categorical_features=categorical, n_jobs=2, random_state=0
            ).fit(X, y_class),
            "classification",
            ["0", "1"],
        ),
        (
            "regression",
            engine.RandomForestRegressor(
                n_estimators=trees, categorical_features=categorical, n_jobs=2, random_state=0
            ).fit(X, y_value),
            "regression",
            None,
        ),
    ]
    results = []
    for name, estimator, task, classes in cases:
        artifact = engine.save_model(estimator)
        model = _loaded(estimator, task, classes)
        export_s, export_cpu, exported = _median(
            lambda m=model: to_onnx(m).SerializeToString(), repeats
        )
        n_nodes = sum(tree.node_count for tree in estimator.trees_)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        session = ort.InferenceSession(exported, options, providers=["CPUExecutionProvider"])
        inputs = _inputs(X_new)
        ort_s, _, _ = _median(lambda s=session, i=inputs: s.run(None, i), repeats)
        predict = estimator.predict_proba if task == "classification" else estimator.predict
        coppice_s, _, _ = _median(lambda p=predict: p(X_new), repeats)
        results.append(
            {
                "case": name,
                "trees": trees,
                "nodes": n_nodes,
                "export_s": export_s,
                "export_cpu_s": export_cpu,
                "artifact_mb": len(artifact) / 1e6,
                "onnx_mb": len(exported) / 1e6,
                "ratio": len(exported) / len(artifact),
                "ort_predict_s": ort_s,
                "coppice_predict_s": coppice_s,
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = run(args.trees, args.rows, args.repeats)
    print(
        "| forest | trees / nodes | export (target < 2 s) | Coppice artifact | ONNX file "
        "(target ≤ 1.5x) | onnxruntime, 20,000 rows | Coppice in-process, 20,000 rows |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['case']} | {r['trees']} / {r['nodes']:,} "
            f"| {r['export_s']:.2f} s ({r['export_cpu_s']:.2f} s CPU) "
            f"| {r['artifact_mb']:.1f} MB | {r['onnx_mb']:.1f} MB ({r['ratio']:.2f}x) "
            f"| {r['ort_predict_s'] * 1000:.0f} ms | {r['coppice_predict_s'] * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    main()
