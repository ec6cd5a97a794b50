"""Request bodies as JSON: NumPy scalars as numbers, NaN as ``null`` (missing)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

JSON_HEADERS = {"Content-Type": "application/json"}


def json_bytes(body: Any) -> bytes:
    """``body`` as JSON, with NaN (which strict JSON lacks) sent as ``null``: missing."""
    try:
        return json.dumps(body, allow_nan=False, default=_json_default).encode()
    except ValueError:
        return json.dumps(_without_nan(body), allow_nan=False, default=_json_default).encode()


def _json_default(value: Any) -> Any:
    # NumPy scalars (np.bool_, np.int64) and arrays that slipped into records.
    if isinstance(value, np.generic | np.ndarray):
        return _without_nan(value.tolist())
    raise TypeError(f"cannot send a {type(value).__name__} as JSON")


def _without_nan(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nan(item) for item in value]
    return value
