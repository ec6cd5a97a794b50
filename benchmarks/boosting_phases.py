"""Where one thread's XGBoost-style fit spends its time, phase by phase inside the whole-tree
kernel, in CPU time (which a loaded machine disturbs far less than wall time).

The whole-tree kernel (:mod:`engine.tree.grow.whole_tree`) is one compiled call, which no
profiler sees into. Here its level loop is replayed in Python, calling the very compiled
kernels it inlines (root totals, histograms, split search, partition, smaller children,
sibling subtraction) on the same arrays in the same order, and each call is timed with the
thread's CPU clock; the replay's trees are checked equal to the kernel's. The fit's work
outside the tree (objective, score update, metric, the tree's node table) is timed by
wrapping those functions. Each phase's total is the minimum over ``--repeats`` fits.

    python -m benchmarks.boosting_phases [--dataset binary] [--trees 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from benchmarks.cpu_pairs import _split

Phases = dict[str, float]


class _Clock:
    def __init__(self) -> None:
        self.seconds: Phases = defaultdict(float)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.thread_time()
        try:
            yield
        finally:
            self.seconds[name] += time.thread_time() - start

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return function(*args, **kwargs)

        return timed


def _replay(clock: _Clock, kernel: Callable[..., int]) -> Callable[..., int]:
    """A Python copy of ``_grow_compiled``'s level loop (one thread), timing each kernel."""
    from engine.tree._histograms import _histograms_compiled, _siblings_compiled
    from engine.tree.grow.growth import (
        HISTOGRAM_CELLS_PER_ROW,
        HISTOGRAM_MAX_CELLS,
        HISTOGRAM_MAX_SPLITS,
        IMPURITY_EPSILON,
    )
    from engine.tree.grow.level_kernels import _totals_compiled
    from engine.tree.grow.partition_kernels import partition_runs
    from engine.tree.grow.whole_tree import _smaller_runs
    from engine.tree.split.search_kernels import search_histograms, search_rows

    codes = 256

    def grow(
        columns: Any,
        channels: Any,
        candidates: Any,
        settings: Any,
        is_categorical: Any,
        missing_code: int,
        limits: Any,
        n_threads: int,
        min_work: int,
        histograms: Any,
        siblings: Any,
        small: Any,
        rows: Any,
        slots: Any,
        new_rows: Any,
        new_slots: Any,
        small_rows: Any,
        small_pairs: Any,
        leaves: Any,
        node_totals: Any,
        node_counts: Any,
        node_depth: Any,
        node_feature: Any,
        node_bin: Any,
        node_missing_left: Any,
        node_left: Any,
        node_bitsets: Any,
    ) -> int:
        n_rows, n_features = channels.shape[0], candidates.size
        n_codes = missing_code + 1
        max_depth = int(limits[0])
        no_classes = np.zeros(0, dtype=np.int64)
        no_monotone = np.zeros(0, dtype=np.int8)
        all_columns = np.arange(n_features)
        with clock.phase("root: totals"):
            rows[:n_rows] = np.arange(n_rows)
            slots[:n_rows] = 0
            _totals_compiled(
                rows[:n_rows], slots[:n_rows], channels, node_totals[0:1], node_counts[0:1]
            )
        with clock.phase("histograms: root"):
            _histograms_compiled(
                columns,
                rows[:n_rows],
                slots[:n_rows],
                candidates,
                channels,
                no_classes,
                histograms[0:1],
                0,
                n_features,
            )
        use_histograms = True
        level_first, n_slots, n_level_rows, depth = 0, 1, n_rows, 0
        while n_slots > 0:
            with clock.phase("per level: record, open, accept"):
                level = slice(level_first, level_first + n_slots)
                node_depth[level] = depth
                node_feature[level] = -1
                node_bin[level] = 0
                node_missing_left[level] = False
                node_left[level] = -1
                leaves[rows[:n_level_rows]] = level_first + slots[:n_level_rows]
                counts = node_counts[level]
                open_slots = (
                    np.flatnonzero(
                        (counts >= limits[1])
                        & (counts >= 2 * limits[2])
                        & (node_totals[level, 1] >= 2 * limits[3])
                    )
                    if depth < max_depth
                    else np.zeros(0, dtype=np.intp)
                )
                n_open = open_slots.size
            if n_open == 0:
                break
            features = np.tile(candidates, (n_open, 1))
            parents = np.ascontiguousarray(node_totals[level_first + open_slots])
            parent_counts = node_counts[level_first + open_slots].astype(float)
            bounds = np.zeros((n_open, 2))
            found = np.zeros(n_open, dtype=np.bool_)
            gain = np.zeros(n_open)
            split_feature = np.zeros(n_open, dtype=np.int64)
            split_bin = np.zeros(n_open, dtype=np.int64)
            missing_left = np.zeros(n_open, dtype=np.bool_)
            left_codes = np.zeros((n_open, n_codes), dtype=np.bool_)
            outputs = (found, gain, split_feature, split_bin, missing_left, left_codes)
            if use_histograms:
                with clock.phase("split search: histograms"):
                    search_histograms(
                        histograms,
                        open_slots,
                        all_columns,
                        features,
                        parents,
                        parent_counts,
                        settings,
                        is_categorical,
                        no_monotone,
                        bounds,
                        missing_code,
                        *outputs,
                    )
            else:
                with clock.phase("split search: rows (deepest level)"):
                    is_open = np.zeros(n_slots, dtype=bool)
                    is_open[open_slots] = True
                    batch = is_open[slots[:n_level_rows]]
                    batch_rows = rows[:n_level_rows][batch]
                    renumber = np.cumsum(is_open) - 1
                    node_start = np.zeros(n_open + 1, dtype=np.intp)
                    node_start[1:] = np.cumsum(
                        np.bincount(renumber[slots[:n_level_rows][batch]], minlength=n_open)
                    )
                    search_rows(
                        columns,
                        batch_rows,
                        node_start,
                        features,
                        channels,
                        no_classes,
                        np.zeros(0),
                        parents,
                        parent_counts,
                        settings,
                        is_categorical,
                        no_monotone,
                        bounds,
                        missing_code,
                        *outputs,
                    )
            with clock.phase("per level: record, open, accept"):
                split_of_slot = np.zeros(n_slots, dtype=np.intp)
                rank_of_slot = np.full(n_slots, -1, dtype=np.intp)
                split_of_slot[open_slots] = np.arange(n_open)
                chosen = found & (gain > limits[4] + IMPURITY_EPSILON)
                n_chosen = int(chosen.sum())
                split_parents = open_slots[chosen]
                rank_of_slot[split_parents] = np.arange(n_chosen)
                first_child = level_first + n_slots
                nodes = level_first + split_parents
                node_feature[nodes] = split_feature[chosen]
                node_bin[nodes] = split_bin[chosen]
                node_missing_left[nodes] = missing_left[chosen]
                node_left[nodes] = first_child + 2 * np.arange(n_chosen)
                for k in np.flatnonzero(chosen):
                    if is_categorical[split_feature[k]]:
                        node_bitsets[level_first + open_slots[k]] = np.packbits(
                            left_codes[k, : 8 * node_bitsets.shape[1]], bitorder="little"
                        )
            if n_chosen == 0:
                break
            n_children = 2 * n_chosen
            with clock.phase("partition (+ children's totals)"):
                level_start = np.zeros(n_slots + 1, dtype=np.intp)
                np.cumsum(node_counts[level], out=level_start[1:])
                n_moved = partition_runs(
                    columns,
                    rows,
                    level_start,
                    split_of_slot,
                    rank_of_slot,
                    split_feature,
                    left_codes,
                    channels,
                    new_rows,
                    new_slots,
                    node_totals[first_child : first_child + n_children],
                    node_counts[first_child : first_child + n_children],
                    small_rows,
                )
            rows, new_rows = new_rows, rows
            slots, new_slots = new_slots, slots
            level_first, n_slots, n_level_rows = first_child, n_children, n_moved
            depth += 1
            if not use_histograms:
                continue
            n_cells = n_children * n_features * codes
            if (
                depth >= max_depth
                or n_cells > HISTOGRAM_CELLS_PER_ROW * n_level_rows
                or n_cells > HISTOGRAM_MAX_CELLS
                or n_chosen > HISTOGRAM_MAX_SPLITS
            ):
                use_histograms = False
                continue
            smaller_side = np.empty(n_chosen, dtype=np.intp)
            with clock.phase("smaller children's rows"):
                n_small = _smaller_runs(
                    rows,
                    node_counts[first_child : first_child + n_children],
                    smaller_side,
                    small_rows,
                    small_pairs,
                )
            with clock.phase("histograms: smaller children"):
                _histograms_compiled(
                    columns,
                    small_rows[:n_small],
                    small_pairs[:n_small],
                    candidates,
                    channels,
                    no_classes,
                    small[:n_chosen],
                    0,
                    n_features,
                )
            with clock.phase("histograms: subtraction"):
                _siblings_compiled(
                    histograms, split_parents, small[:n_chosen], smaller_side, siblings
                )
            histograms, siblings = siblings, histograms
        return level_first + n_slots

    return grow


def _fit(X: Any, y: Any, trees: int, replay: bool) -> tuple[Phases, float, list[Any]]:
    import engine
    import engine.boosting._xgboost_rounds as rounds
    import engine.tree.grow.whole_tree as whole_tree

    clock = _Clock()
    saved = {
        "kernel": whole_tree._grow_compiled,
        "tree": whole_tree._tree,
        "metric": rounds._metric,
        "build": rounds.build_newton_trees,
    }
    # Seeded: an unseeded fit draws its features' order afresh, and on five classes a tie
    # between two features' gains then goes to either (the replay check compares fits).
    model = engine.XGBoostClassifier(
        n_estimators=trees, max_depth=6, learning_rate=0.1, n_jobs=1, random_state=0
    )
    whole_tree._tree = clock.wrap("node table (Tree)", saved["tree"])
    rounds._metric = clock.wrap("train metric", saved["metric"])
    rounds.build_newton_trees = clock.wrap("tree call (all of it)", saved["build"])
    whole_tree._grow_compiled = (
        _replay(clock, saved["kernel"]) if replay else clock.wrap("kernel", saved["kernel"])
    )
    try:
        start = time.thread_time()
        model.fit(X, y)
        total = time.thread_time() - start
    finally:
        whole_tree._grow_compiled = saved["kernel"]
        whole_tree._tree = saved["tree"]
        rounds._metric = saved["metric"]
        rounds.build_newton_trees = saved["build"]
    return dict(clock.seconds), total, [tree for stage in model.estimators_ for tree in stage]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="binary")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X, _, y, _, _ = _split(args.dataset)
    _fit(X[:2000], y[:2000], 2, replay=False)
    _fit(X[:2000], y[:2000], 2, replay=True)
    best: dict[bool, Phases] = {False: {}, True: {}}
    totals: dict[bool, float] = {}
    load = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for replay in (False, True):
            phases, total, trees = _fit(X, y, args.trees, replay)
            totals[replay] = min(totals.get(replay, np.inf), total)
            for name, seconds in phases.items():
                best[replay][name] = min(best[replay].get(name, np.inf), seconds)
            if replay:
                # The first 3 rounds' trees: K a round on K classes (estimators_ is by round).
                _, _, kernel_trees = _fit(X, y, 3, replay=False)
                for a, b in zip(trees[: len(kernel_trees)], kernel_trees, strict=True):
                    assert np.array_equal(a.nodes, b.nodes), "the replay grew another tree"
    load.append(os.getloadavg()[0])
    fit = totals[False]
    print(
        f"{args.dataset}, {args.trees} trees, one thread; CPU seconds, minimum of "
        f"{args.repeats}; load {load[0]:.1f} -> {load[1]:.1f}"
    )
    print(f"fit as shipped: {fit:.3f} s; fit with the replayed kernel: {totals[True]:.3f} s")
    shipped = best[False]
    shipped.setdefault("train metric", 0.0)  # only computed when a callback listens
    rows = {
        "the fit": fit,
        "tree calls": shipped["tree call (all of it)"],
        "  kernel (one compiled call)": shipped["kernel"],
        "  node table (Tree) from the kernel's arrays": shipped["node table (Tree)"],
        "train metric": shipped["train metric"],
        "rest (binning, objective, score update, Python)": fit
        - shipped["tree call (all of it)"]
        - shipped["train metric"],
    }
    for name, seconds in sorted(best[True].items(), key=lambda item: -item[1]):
        if name not in ("tree call (all of it)", "node table (Tree)", "train metric"):
            rows[f"  replayed: {name}"] = seconds
    print("| phase | CPU s | share of the fit |")
    print("|---|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.3f} | {100 * seconds / fit:.1f}% |")


if __name__ == "__main__":
    main()
