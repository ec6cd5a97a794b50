"""The benchmark datasets: fixed generators and seeds, written once to ``.npy`` files.

The parent process generates every dataset (it is the only process that imports
scikit-learn's generators) and each measured child loads the arrays from disk, so a child's
memory holds NumPy, the data and the library under test, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DATASETS",
    "DatasetFiles",
    "DatasetSpec",
    "LoadedData",
    "Task",
    "load_dataset",
    "write_dataset",
]

Task = Literal["classification", "regression"]

TEST_FRACTION = 0.2
SPLIT_SEED = 0


@dataclass(frozen=True)
class DatasetSpec:
    """One synthetic dataset: a scikit-learn generator with fixed arguments.

    ``test_fraction=0`` keeps every row for training (the scaling study fits only).
    """

    name: str
    task: Task
    generator: Literal["make_classification", "make_friedman1"]
    n_samples: int
    params: dict[str, Any] = field(default_factory=dict)
    test_fraction: float = TEST_FRACTION

    @property
    def n_features(self) -> int:
        return int(self.params["n_features"])

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        split = (
            f"{1 - self.test_fraction:.0%}/{self.test_fraction:.0%} split"
            if self.test_fraction
            else "all rows for training"
        )
        return f"{self.generator}(n_samples={self.n_samples:_}, {args}); {split}"

    def with_samples(self, n_samples: int) -> DatasetSpec:
        return replace(self, n_samples=n_samples)


DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "binary",
        "classification",
        "make_classification",
        100_000,
        {"n_features": 40, "n_informative": 20, "random_state": 0},
    ),
    DatasetSpec(
        "friedman1",
        "regression",
        "make_friedman1",
        100_000,
        {"n_features": 20, "noise": 1.0, "random_state": 0},
    ),
    DatasetSpec(
        "multiclass5",
        "classification",
        "make_classification",
        50_000,
        {"n_features": 30, "n_informative": 15, "n_classes": 5, "random_state": 0},
    ),
)


@dataclass(frozen=True)
class DatasetFiles:
    """Where a written dataset lives, and the facts a model factory needs about it."""

    spec: DatasetSpec
    directory: Path
    n_train: int
    n_test: int


@dataclass(frozen=True)
class LoadedData:
    X_train: NDArray[np.float64]
    y_train: NDArray[Any]
    X_test: NDArray[np.float64]
    y_test: NDArray[Any]


def _generate(spec: DatasetSpec) -> tuple[NDArray[np.float64], NDArray[Any]]:
    from sklearn import datasets  # the parent only: children never import scikit-learn for data

    make = getattr(datasets, spec.generator)
    X, y = make(n_samples=spec.n_samples, **spec.params)
    return np.ascontiguousarray(X, dtype=np.float64), np.asarray(y)


def write_dataset(spec: DatasetSpec, directory: Path) -> DatasetFiles:
    """Generate ``spec``, split it and save the four arrays under ``directory / spec.name``."""
    X, y = _generate(spec)
    target = directory / f"{spec.name}-{spec.n_samples}"
    target.mkdir(parents=True, exist_ok=True)
    if spec.test_fraction:
        from sklearn.model_selection import train_test_split

        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=spec.test_fraction, random_state=SPLIT_SEED
        )
    else:
        X_train, y_train = X, y
        X_test, y_test = X[:0], y[:0]
    arrays = {"X_train": X_train, "y_train": y_train, "X_test": X_test, "y_test": y_test}
    for name, array in arrays.items():
        np.save(target / f"{name}.npy", np.ascontiguousarray(array))
    return DatasetFiles(spec, target, n_train=len(y_train), n_test=len(y_test))


def load_dataset(files: DatasetFiles) -> LoadedData:
    """Read the arrays fully into memory (not memory-mapped), as a user's data would be."""

    def load(name: str) -> NDArray[Any]:
        array: NDArray[Any] = np.load(files.directory / f"{name}.npy")
        return array

    return LoadedData(load("X_train"), load("y_train"), load("X_test"), load("y_test"))
