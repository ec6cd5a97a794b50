"""One fit, as the worker's fit process runs it, and its peak memory: for the estimate's test.

    python -m tests.service.jobs.fit_memory_probe METHOD TASK ROWS FEATURES CLASSES PARAMS_JSON

Builds the columns as the fit process decodes them (float64 arrays, int32 codes), runs
``run_training`` with a 20% holdout in this process, and prints one JSON line:
``{"peak_bytes": VmHWM, "seconds": ...}``. A fresh process per fit keeps one fit's leftovers
out of the next one's peak.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.training import TrainingSpec, run_training


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def columns(task: str, n_rows: int, n_features: int, n_classes: int) -> dict[str, ColumnData]:
    rng = np.random.default_rng(0)
    found: dict[str, ColumnData] = {
        f"x{j}": NumericColumn(f"x{j}", rng.standard_normal(n_rows)) for j in range(n_features)
    }
    signal = found["x0"].as_float() * 2 + found["x1"].as_float() ** 2
    if task == "classification":
        codes = (np.abs(signal * 3).astype(np.int64) % n_classes).astype(np.int32)
        labels = tuple(f"c{i}" for i in range(n_classes))
        found["y"] = CategoricalColumn("y", codes, labels)
    else:
        found["y"] = NumericColumn("y", signal + rng.standard_normal(n_rows))
    return found


def main(argv: list[str]) -> int:
    method, task, rows, features, classes, params = argv
    data = columns(task, int(rows), int(features), int(classes))
    spec = TrainingSpec(
        method=method,
        task=task,
        target="y",
        features=[name for name in data if name != "y"],
        params=json.loads(params),
        validation={"holdout": 0.2},
        seed=0,
    )
    started = time.monotonic()
    run_training(spec, data, lambda _fraction, _stage: None, lambda: False)
    print(json.dumps({"peak_bytes": peak_rss(), "seconds": time.monotonic() - started}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
