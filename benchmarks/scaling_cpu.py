"""Fit time per row at 1M rows against 100k, in CPU time, for a shared machine.

The scaling study (``benchmarks.run --scaling-1m``) times whole fits on the wall clock, which on
a loaded machine swings more than the effect being measured. This fits the engine's random
forest single-threaded in one process, alternating the sizes, and compares the CPU time per row
and tree (medians over rounds).

    python -m benchmarks.scaling_cpu [--rounds 3] [--trees-small 8] [--trees-large 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import make_classification

SMALL, LARGE = 100_000, 1_000_000


def _cpu_per_row_and_tree(X: np.ndarray, y: np.ndarray, trees: int, seed: int) -> float:
    from engine import RandomForestClassifier

    started = time.process_time()
    RandomForestClassifier(n_estimators=trees, n_jobs=1, random_state=seed).fit(X, y)
    return 1e6 * (time.process_time() - started) / (X.shape[0] * trees)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trees-small", type=int, default=8)
    parser.add_argument("--trees-large", type=int, default=2)
    args = parser.parse_args()
    data = {n: make_classification(n, 40, n_informative=20, random_state=0) for n in (SMALL, LARGE)}
    _cpu_per_row_and_tree(data[SMALL][0][:2000], data[SMALL][1][:2000], 1, 0)  # load kernels
    per_row: dict[int, list[float]] = {SMALL: [], LARGE: []}
    for seed in range(args.rounds):
        for n, trees in ((SMALL, args.trees_small), (LARGE, args.trees_large)):
            per_row[n].append(_cpu_per_row_and_tree(*data[n], trees, seed))
            print(f"round {seed + 1}: {n:,} rows, {per_row[n][-1]:.2f} µs CPU per row and tree")
    small, large = (float(np.median(per_row[n])) for n in (SMALL, LARGE))
    print(f"median µs per row and tree: {small:.2f} at {SMALL:,}, {large:.2f} at {LARGE:,}")
    print(f"1M / 100k: {large / small:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
