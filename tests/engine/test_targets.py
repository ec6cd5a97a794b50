"""Label encoding: counting small non-negative integers gives what sorting gives."""

from __future__ import annotations

import numpy as np
import pytest

from engine._targets import encode_labels


@pytest.mark.parametrize(
    "labels",
    [
        np.array([3, 0, 2, 2, 0, 3]),  # gaps: 1 is absent
        np.array([1, 1, 1]),
        np.arange(10, dtype=np.uint8)[::-1],
        np.array([[2], [0], [2]]),  # a column
        np.array([-1, 4, -1]),  # negative: sorted
        np.array([70_000, 5, 5]),  # beyond the counted range: sorted
        np.array(["b", "a", "b"]),
        np.array([0.5, 0.25, 0.5]),
    ],
)
def test_labels_are_encoded_as_numpy_unique_encodes_them(labels: np.ndarray) -> None:
    expected_classes, expected = np.unique(labels, return_inverse=True)

    classes, encoded = encode_labels(labels)

    np.testing.assert_array_equal(classes, expected_classes)
    assert classes.dtype == expected_classes.dtype
    np.testing.assert_array_equal(encoded, expected.ravel())
    assert encoded.dtype == np.int64 and encoded.ndim == 1


def test_random_integer_labels() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        labels = rng.choice(rng.choice(50, size=rng.integers(1, 10), replace=False), size=200)
        classes, encoded = encode_labels(labels)
        np.testing.assert_array_equal(classes[encoded], labels)
        np.testing.assert_array_equal(classes, np.unique(labels))
