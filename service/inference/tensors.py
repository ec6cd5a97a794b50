"""Tensors of the Open Inference Protocol: datatypes, and data in JSON or in binary form.

A request tensor's data arrives either as JSON (``data``: numbers or strings, flat or nested,
row-major) or, with Triton's binary tensor data extension, as raw bytes after the JSON header:
little-endian, row-major, no padding; a ``BYTES`` element is a 4-byte little-endian length
followed by that many bytes. Either way it is decoded here to one flat NumPy array: float64
for the numeric datatypes (``null`` in JSON is NaN, i.e. missing), an object array of ``str``
(or ``None``) for ``BYTES``. Output tensors go the other way.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.errors import BadRequest

# Little-endian NumPy dtypes of the fixed-size datatypes (BYTES is variable-sized).
NUMERIC_DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}
BYTES = "BYTES"
DATATYPES = (*NUMERIC_DTYPES, BYTES)

_LENGTH = struct.Struct("<I")
# The Python types a JSON ``data`` element may have, per datatype family; None is missing.
_JSON_FLOAT_TYPES: frozenset[type] = frozenset({int, float, type(None)})
_JSON_INT_TYPES: frozenset[type] = frozenset({int, type(None)})
_JSON_BOOL_TYPES: frozenset[type] = frozenset({bool})
_JSON_BYTES_TYPES: frozenset[type] = frozenset({str, type(None)})


@dataclass(frozen=True, slots=True)
class Tensor:
    """One decoded input tensor: its values flat, in row-major order."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    values: npt.NDArray[Any]  # float64 (numeric datatypes) or object of str | None (BYTES)
    where: str  # how error messages name it, e.g. "inputs[0] ('input')"


@dataclass(frozen=True, slots=True)
class OutputTensor:
    """One output tensor, ready to be written as JSON ``data`` or as binary data."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    values: npt.NDArray[Any]  # float64, or object of str for BYTES
    binary: bool
    parameters: dict[str, Any] | None = None  # the output's own, e.g. an explanation's bias


def element_count(shape: Sequence[int]) -> int:
    return math.prod(shape)


def check_datatype(datatype: str, where: str) -> None:
    if datatype in DATATYPES:
        return
    hint = " (BF16 has no NumPy type here; send FP32)" if datatype == "BF16" else ""
    raise BadRequest(
        f"{where} has datatype '{datatype}'{hint}; the datatypes are {', '.join(DATATYPES)} "
        "(case-sensitive)."
    )


# --- decoding ---------------------------------------------------------------------------------


def from_json(datatype: str, data: Any, count: int, where: str) -> npt.NDArray[Any]:
    """The JSON ``data`` of one tensor (flat or nested lists) as a flat array of ``count``."""
    if not isinstance(data, list):
        raise BadRequest(f"{where}.data must be a JSON array, flat or nested; it is {_kind(data)}.")
    try:
        flat = np.asarray(data, dtype=object).ravel()
    except ValueError:
        raise BadRequest(f"{where}.data is nested arrays of unequal lengths.") from None
    allowed = _json_types(datatype)
    if not set(map(type, flat)) <= allowed:
        bad = next(value for value in flat if type(value) not in allowed)
        raise BadRequest(
            f"{where}.data holds {_kind(bad)} but its datatype is {datatype}; "
            + _json_expectation(datatype)
        )
    if flat.size != count:
        raise BadRequest(
            f"{where}.data holds {flat.size} elements but its shape needs {count}; send the "
            "tensor's elements in row-major order, flat or nested."
        )
    if datatype == BYTES:
        return flat
    try:
        values = flat.astype(np.float64)
    except OverflowError:
        raise BadRequest(f"{where}.data holds a number too large for {datatype}.") from None
    _check_range(values, datatype, where)
    return values


def from_binary(datatype: str, raw: bytes, count: int, where: str) -> npt.NDArray[Any]:
    """The binary data of one tensor as a flat array of ``count`` elements."""
    if datatype == BYTES:
        return _bytes_elements(raw, count, where)
    dtype = NUMERIC_DTYPES[datatype]
    if len(raw) != count * dtype.itemsize:
        raise BadRequest(
            f"{where} has binary_data_size {len(raw)} but its shape and datatype {datatype} "
            f"need {count * dtype.itemsize} bytes ({count} × {dtype.itemsize})."
        )
    return np.frombuffer(raw, dtype=dtype).astype(np.float64)


def _bytes_elements(raw: bytes, count: int, where: str) -> npt.NDArray[Any]:
    if count * _LENGTH.size > len(raw):  # checked before allocating ``count`` slots
        raise BadRequest(
            f"{where} has {len(raw)} bytes of binary data, too few for {count} BYTES elements "
            "(each is a 4-byte little-endian length, then that many bytes)."
        )
    values = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + _LENGTH.size > len(raw):
            raise BadRequest(
                f"{where} has binary data for {i} BYTES elements but its shape needs {count}; "
                "each element is a 4-byte little-endian length, then that many bytes."
            )
        (length,) = _LENGTH.unpack_from(raw, offset)
        start = offset + _LENGTH.size
        offset = start + length
        if offset > len(raw):
            raise BadRequest(
                f"{where}: BYTES element {i} says it is {length} bytes long, past the end of "
                "the tensor's binary data."
            )
        try:
            values[i] = raw[start:offset].decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"{where}: BYTES element {i} is not UTF-8 text.") from None
    if offset != len(raw):
        raise BadRequest(
            f"{where} has {len(raw) - offset} bytes of binary data after its {count} BYTES "
            "elements; binary_data_size must be the exact size."
        )
    return values


def _json_types(datatype: str) -> frozenset[type]:
    if datatype == BYTES:
        return _JSON_BYTES_TYPES
    if datatype == "BOOL":
        return _JSON_BOOL_TYPES
    if datatype.startswith(("INT", "UINT")):
        return _JSON_INT_TYPES
    return _JSON_FLOAT_TYPES


def _json_expectation(datatype: str) -> str:
    if datatype == BYTES:
        return "send strings (null for missing)."
    if datatype == "BOOL":
        return "send true or false."
    if datatype.startswith(("INT", "UINT")):
        return "send integers (null for missing), or use FP64."
    return "send numbers (null for missing)."


def _check_range(values: npt.NDArray[np.float64], datatype: str, where: str) -> None:
    dtype = NUMERIC_DTYPES[datatype]
    if dtype.kind not in "iu" or values.size == 0:
        return
    info = np.iinfo(dtype)
    finite = values[~np.isnan(values)]
    if finite.size and (finite.min() < info.min or finite.max() > info.max):
        raise BadRequest(
            f"{where}.data holds a value outside the range of {datatype} [{info.min}, {info.max}]."
        )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "nested arrays of unequal lengths"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


# --- encoding ---------------------------------------------------------------------------------


def to_json_data(tensor: OutputTensor) -> list[Any]:
    """The tensor's elements as a flat JSON list; NaN (which JSON lacks) becomes null."""
    if tensor.datatype == BYTES:
        return list(tensor.values.tolist())
    values = tensor.values
    data: list[Any] = values.tolist()
    if np.isnan(values).any():
        data = [None if math.isnan(v) else v for v in data]
    return data


def to_binary(tensor: OutputTensor) -> bytes:
    """The tensor's elements in the binary tensor data format."""
    if tensor.datatype == BYTES:
        parts = []
        for value in tensor.values.tolist():
            encoded = str(value).encode("utf-8")
            parts.append(_LENGTH.pack(len(encoded)))
            parts.append(encoded)
        return b"".join(parts)
    return np.ascontiguousarray(tensor.values, dtype=NUMERIC_DTYPES[tensor.datatype]).tobytes()
