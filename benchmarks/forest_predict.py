"""A 20,000-row predict of the 100-tree forest beside scikit-learn's, in one process.

Issue 12's prediction target: the engine's random forest (100 full-depth trees, fitted on the
80,000 training rows of ``binary``) predicts the 20,000 test rows in at most half of
scikit-learn's time for the same forest. Both forests are fitted once (``n_jobs=2``,
``random_state=0``) and cached under ``--cache``; then each round times ``predict_proba`` of
the test rows by each library in turn, with ``n_jobs`` 1 then 2, and one-row predicts.

On a shared machine the wall clock swings with the neighbours' load, so single-thread figures
are CPU time (``time.process_time``: this process's CPU, both libraries' threads included);
two-thread figures are wall time, since their point is the wall clock. Medians over rounds.

    python -m benchmarks.forest_predict [--rounds 9] [--cache benchmarks/results/forest_predict]

To time another engine (an earlier commit, say) against the same cached forests, put its
checkout first on the path: ``PYTHONPATH=/tmp/old:. python benchmarks/forest_predict.py``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.datasets import DATASETS, load_dataset, write_dataset

SEED = 0
TREES = 100


def _forests(cache: Path) -> tuple[Any, Any, np.ndarray]:
    """The engine's and scikit-learn's forests (fitted once, then loaded) and the test rows."""
    import engine

    spec = next(spec for spec in DATASETS if spec.name == "binary")
    data = load_dataset(write_dataset(spec, cache / "data"))
    ours, theirs = cache / "coppice.model", cache / "sklearn.pickle"
    if not ours.exists():
        model = engine.RandomForestClassifier(n_estimators=TREES, n_jobs=2, random_state=SEED)
        ours.write_bytes(engine.save_model(model.fit(data.X_train, data.y_train)))
    if not theirs.exists():
        from sklearn.ensemble import RandomForestClassifier

        peer = RandomForestClassifier(n_estimators=TREES, n_jobs=2, random_state=SEED)
        theirs.write_bytes(pickle.dumps(peer.fit(data.X_train, data.y_train)))
    peer = pickle.loads(theirs.read_bytes())  # our own cache file
    return engine.load_model(ours.read_bytes()), peer, data.X_test


def _timed(function: Callable[[], Any]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def _one_row_ms(predict: Callable[[np.ndarray], Any], X: np.ndarray, calls: int) -> float:
    """Median CPU milliseconds of ``calls`` one-row predicts."""
    times = [_timed(partial(predict, X[i : i + 1]))[1] for i in range(calls)]
    return 1e3 * statistics.median(times)


def _commit() -> str:
    import engine

    root = Path(engine.__file__).resolve().parent.parent
    try:
        return subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"unknown ({root})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--one-row-calls", type=int, default=200)
    parser.add_argument(
        "--cache", type=Path, default=Path(__file__).resolve().parent / "results" / "forest_predict"
    )
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    ours, peer, X = _forests(args.cache)
    import engine

    load_start = os.getloadavg()[0]
    print(f"engine from {Path(engine.__file__).parent} ({_commit()}); {X.shape[0]:,} rows")
    # Same forest, same answers (up to floating point): a sanity check, not a timing.
    agreement = float(np.mean(ours.predict(X) == peer.predict(X)))
    times: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for n_jobs in (1, 2):
            ours.n_jobs = peer.n_jobs = n_jobs
            # Alternate which library goes first, so neither always follows the other's
            # traffic through the caches.
            pair = [("coppice", ours), ("sklearn", peer)]
            for name, model in pair if round_ % 2 == 0 else pair[::-1]:
                wall, cpu = _timed(partial(model.predict_proba, X))
                times.setdefault(f"{name} n_jobs={n_jobs} wall", []).append(wall)
                times.setdefault(f"{name} n_jobs={n_jobs} cpu", []).append(cpu)
    ours.n_jobs = peer.n_jobs = 1
    one_row = {
        name: _one_row_ms(model.predict_proba, X, args.one_row_calls)
        for name, model in (("coppice", ours), ("sklearn", peer))
    }
    medians = {key: 1e3 * statistics.median(values) for key, values in times.items()}
    for key, value in medians.items():
        print(f"{key}: {value:.1f} ms (median of {args.rounds})")
    for n_jobs, clock in ((1, "cpu"), (2, "wall")):
        ratio = (
            medians[f"coppice n_jobs={n_jobs} {clock}"]
            / medians[f"sklearn n_jobs={n_jobs} {clock}"]
        )
        print(f"coppice / sklearn, n_jobs={n_jobs} ({clock}): {ratio:.2f}x (target <= 0.5x)")
    print(
        f"one row (CPU, median of {args.one_row_calls}): "
        + ", ".join(f"{name} {ms:.3f} ms" for name, ms in one_row.items())
    )
    print(f"same predicted class: {agreement:.2%}")
    print(f"load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
