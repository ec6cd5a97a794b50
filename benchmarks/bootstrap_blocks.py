"""Test accuracy of forests drawn with the one-stream bootstrap and the block-wise one.

The block-wise bootstrap (issue 27, ``engine.ensemble._sampling``) draws each block's share of
a member's draws from the member's stream, then the block's rows from a stream of its own;
it replaced the draw of ``n`` row indices from the member's stream. Both are exactly the
bootstrap's distribution, so the forests differ only by which random sample they drew: this
compares their test accuracy (classification) and R² (regression) on the same seeds, blocks
small enough that the 12,000 training rows fall into several of them.

    python -m benchmarks.bootstrap_blocks [--block-rows 2048] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import engine.ensemble._sampling as sampling
import engine.ensemble._tree_ensemble as tree_ensemble
from engine import RandomForestClassifier, RandomForestRegressor


def one_stream(rng: np.random.Generator, member: Any, seed: Any) -> Any:
    """The draw the block-wise one replaced: ``n`` indices from the member's stream."""
    n = member.n_samples
    counts = np.bincount(rng.integers(0, n, member.n_draws), minlength=n)
    return counts.astype(np.int64), sampling.draw_features(rng, member)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block-rows", type=int, default=2048)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    sampling.BOOTSTRAP_BLOCK_ROWS = args.block_rows
    rng = np.random.default_rng(0)
    n = 20_000
    X = rng.normal(size=(n, 12))
    signal = X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    y_class = (signal + rng.logistic(size=n) > 0).astype(int)
    y_value = signal + rng.normal(size=n)
    train, test = slice(0, 12_000), slice(12_000, n)
    print(f"block_rows={args.block_rows}, seeds {args.seeds}")
    for name, draw in (("one stream", one_stream), ("block-wise", sampling.draw_member)):
        tree_ensemble.draw_member = draw  # type: ignore[assignment]
        accuracy, r2 = [], []
        for seed in args.seeds:
            forest = RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1)
            forest.fit(X[train], y_class[train])
            accuracy.append(float(np.mean(forest.predict(X[test]) == y_class[test])))
            regression = RandomForestRegressor(
                n_estimators=100, random_state=seed, max_features=0.5, n_jobs=1
            ).fit(X[train], y_value[train])
            residual = y_value[test] - regression.predict(X[test])
            r2.append(float(1 - residual.var() / y_value[test].var()))
        print(
            f"{name}: accuracy {np.round(accuracy, 4).tolist()} mean {np.mean(accuracy):.4f} "
            f"sd {np.std(accuracy, ddof=1):.4f}; R2 {np.round(r2, 4).tolist()} "
            f"mean {np.mean(r2):.4f} sd {np.std(r2, ddof=1):.4f}"
        )


if __name__ == "__main__":
    main()
