"""The whole-tree compiled call against the level loop it replaced, paired in one process, and
what a second thread can give on this machine.

Each XGBoost-style fit runs twice, alternately: as the engine grows it (each tree in one
compiled call, :mod:`engine.tree.grow.whole_tree`) and with that call declined, so the Python
level loop of :mod:`engine.tree.grow.grower` grows the same trees. Wall and process CPU seconds,
medians of the repeats. ``--probe`` times small Numba loops alone and two at once on two threads
(register-bound, L1-resident, streaming 4 MB and 64 MB, a 256-bin histogram scatter): where two
at once take twice as long, a second thread has nothing to give that kind of work.

    python -m benchmarks.whole_tree [--repeats 2] [--probe]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.cpu_pairs import _split

WORKLOADS = {"binary": 100, "multiclass5": 50}


def _fit(X: Any, y: Any, trees: int, n_jobs: int) -> tuple[float, float]:
    import engine

    model = engine.XGBoostClassifier(
        n_estimators=trees, max_depth=6, learning_rate=0.1, n_jobs=n_jobs
    )
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X, y)
    return time.perf_counter() - start, time.process_time() - cpu


def pairs(repeats: int) -> None:
    import engine
    import engine.tree.grow.grower as grower

    whole = grower.grows_in_one_call
    print(f"load average {os.getloadavg()[0]:.1f}")
    for dataset, trees in WORKLOADS.items():
        X, _, y, _, _ = _split(dataset)
        engine.XGBoostClassifier(n_estimators=2, max_depth=6, n_jobs=2).fit(X[:2000], y[:2000])
        times: dict[tuple[str, int], list[tuple[float, float]]] = {}
        try:
            for _ in range(repeats):
                for n_jobs in (1, 2):
                    for mode in ("whole", "loop"):
                        grower.grows_in_one_call = whole if mode == "whole" else _never
                        times.setdefault((mode, n_jobs), []).append(_fit(X, y, trees, n_jobs))
        finally:
            grower.grows_in_one_call = whole
        for n_jobs in (1, 2):
            w, c = (_medians(times[(mode, n_jobs)]) for mode in ("whole", "loop"))
            print(
                f"{dataset} {trees} trees n_jobs={n_jobs}: whole-tree call wall {w[0]:.2f} "
                f"CPU {w[1]:.2f} | level loop wall {c[0]:.2f} CPU {c[1]:.2f} | "
                f"loop / whole wall {c[0] / w[0]:.2f}x CPU {c[1] / w[1]:.2f}x"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")


def _never(growth: Any) -> bool:
    return False


def _medians(times: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def probe() -> None:
    from numba import njit

    @njit(nogil=True)
    def chain(n: int) -> float:
        total = 0.0
        for i in range(n):
            total += (i % 7) * 0.5
        return total

    @njit(nogil=True)
    def stream(a: Any, reps: int) -> float:
        s0 = s1 = 0.0
        for _ in range(reps):
            for i in range(0, a.size, 2):
                s0 += a[i]
                s1 += a[i + 1]
        return s0 + s1

    @njit(nogil=True)
    def scatter(codes: Any, reps: int) -> float:
        cells = np.zeros((256, 3))
        for _ in range(reps):
            for i in range(codes.size):
                cells[codes[i], 0] += 1.0
                cells[codes[i], 1] += 0.5
        return float(cells.sum())

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 256, 40_000).astype(np.uint8)
    cases: dict[str, tuple[Callable[..., float], Callable[[], tuple[Any, ...]]]] = {
        "register-bound": (chain, lambda: (300_000_000,)),
        "L1 stream (16 KB)": (stream, lambda: (rng.random(2048), 200_000)),
        "stream 4 MB": (stream, lambda: (rng.random(4 * 131_072), 500)),
        "stream 64 MB": (stream, lambda: (rng.random(64 * 131_072), 31)),
        "256-bin histogram": (scatter, lambda: (codes.copy(), 3000)),
    }
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name, (function, arguments) in cases.items():
        function(*arguments())  # compile
        args = arguments()
        start = time.perf_counter()
        function(*args)
        alone = time.perf_counter() - start
        threads = [threading.Thread(target=function, args=arguments()) for _ in range(2)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        both = time.perf_counter() - start
        print(f"{name:20s} alone {alone:.2f} s, two at once {both:.2f} s ({both / alone:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--probe", action="store_true")
    args = parser.parse_args()
    if args.probe:
        probe()
    else:
        pairs(args.repeats)


if __name__ == "__main__":
    main()
