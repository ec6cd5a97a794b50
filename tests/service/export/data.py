"""A table with what Coppice's trees do that public converters lose: missing values in numeric
and categorical columns, categorical subset splits, and (at predict time) unseen categories."""

from __future__ import annotations

from typing import Any

import numpy as np

COLUMNS = ["x", "z", "colour", "size", "label", "species", "amount"]
FEATURES = ["x", "z", "colour", "size"]
COLOURS = ["red", "green", "blue", "amber", "violet", "teal"]
SIZES = ["S", "M", "L", "XL"]


def rows(n: int = 300, seed: int = 0) -> list[list[Any]]:
    rng = np.random.default_rng(seed)
    out: list[list[Any]] = []
    for i in range(n):
        x, z = rng.normal(), rng.normal()
        # teal is rare, so a holdout or a bootstrap sample may lack it: the model knows a
        # category that some of its trees' binners never saw.
        colour = str(rng.choice(COLOURS, p=[0.3, 0.25, 0.2, 0.13, 0.1, 0.02]))
        size = str(rng.choice(SIZES))
        effect = {"red": 1.5, "green": -1.0, "blue": 0.5, "amber": -0.5, "violet": 2.0}.get(
            colour, 0
        )
        amount = 2 * x + effect + 0.3 * z + (0.8 if size in ("M", "XL") else 0.0)
        amount += 0.3 * rng.normal()
        label = "yes" if amount > 0.5 else "no"
        species = "a" if amount < -0.5 else ("b" if amount < 1.5 else "c")
        out.append(
            [
                None if i % 9 == 0 else float(x),
                float(z),
                None if i % 13 == 0 else colour,
                None if i % 17 == 0 else size,
                label,
                species,
                float(amount),
            ]
        )
    return out


def records(n: int = 120, seed: int = 1) -> list[dict[str, Any]]:
    """Rows to predict: new values, gaps, absent features and categories never seen."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        record: dict[str, Any] = {
            "x": None if i % 7 == 0 else float(rng.normal() * 1.5),
            "z": float(rng.normal()),
            "colour": ["purple", None, *COLOURS][i % (len(COLOURS) + 2)],
            "size": [*SIZES, "XXL", None][i % (len(SIZES) + 2)],
        }
        if i % 11 == 5:
            del record["z"]  # an absent feature is missing
        out.append(record)
    return out


def onnx_inputs(records: list[dict[str, Any]], categorical: set[str]) -> dict[str, np.ndarray]:
    """The records as the exported graph's inputs: one [N, 1] tensor per feature; a missing
    numeric value is NaN, a missing category the empty string (any unknown string is)."""
    inputs: dict[str, np.ndarray] = {}
    for name in FEATURES:
        values = [record.get(name) for record in records]
        if name in categorical:
            inputs[name] = np.array([[v if v is not None else ""] for v in values], dtype=object)
        else:
            inputs[name] = np.array(
                [[np.nan if v is None else v] for v in values], dtype=np.float64
            )
    return inputs
