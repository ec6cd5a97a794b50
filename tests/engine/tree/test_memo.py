"""The last-matrix memo: one value per matrix object, never another matrix's, even from threads."""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from engine.tree._memo import LastMatrixMemo


def test_the_value_is_computed_once_per_matrix_and_forgotten_with_it() -> None:
    calls: list[int] = []

    def compute(matrix: np.ndarray) -> int:
        calls.append(matrix.shape[0])
        return int(matrix.sum())

    memo = LastMatrixMemo(compute)
    first, second = np.ones((3, 2)), np.ones((4, 2))
    assert memo(first) == memo(first) == 6
    assert memo(second) == 8
    assert memo(first) == 6
    assert calls == [3, 4, 3]
    del first, second
    gc.collect()
    assert memo._entry is None  # the matrices went, and their values with them


def test_threads_asking_about_different_matrices_get_their_own_values() -> None:
    memo = LastMatrixMemo(lambda matrix: matrix.copy())
    matrices = [np.full((50, 3), i) for i in range(8)]

    def ask(i: int) -> bool:
        return all(memo(matrices[i])[0, 0] == i for _ in range(2_000))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(ask, range(8)))
