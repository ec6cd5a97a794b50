"""The container of a saved model: header, manifest, array data and digest, and every check a
reader makes of them before trusting them.

Layout (integers little-endian)::

    offset   size  field
    0        8     magic b"COPPICE\\0"
    8        2     format major version, uint16 (a reader refuses a newer major)
    10       2     format minor version, uint16 (additions a same-major reader may ignore)
    12       4     manifest length M, uint32
    16       M     manifest: UTF-8 JSON, see below
    16 + M   P     zero padding up to D, the next multiple of 8
    D        N     array data: raw little-endian C-order bytes, each array starting at a
                   multiple of 8 from D, zero padding between arrays
    D + N    32    SHA-256 of every byte before it

The manifest is ``{"format", "format_version", "class", "saved_with", "arrays", "data_nbytes",
"state"}``. ``arrays`` lists ``{"dtype", "shape", "offset", "nbytes"}`` with offsets relative
to D. An array object held in several places (the bin mapper that boosted trees share) is
stored once and its refs repeat; loading gives every place the same array, as when saved.
``state`` is the value tree of :mod:`engine.persistence._state`.

The digest detects truncation and corruption, not tampering: anyone can write a valid file,
which is why the reader trusts nothing in it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

MAGIC = b"COPPICE\0"
FORMAT_VERSION = (1, 0)
_HEADER = struct.Struct("<8sHHI")
_DIGEST_SIZE = hashlib.sha256().digest_size
_ALIGNMENT = 8
_MAX_NDIM = 32
_MAX_EMPTY_DIM = 2**31  # a dimension of an array with no elements has no size to check against
_MAX_FIELDS = 4096
_MAX_ITEMSIZE = 2**24
_SIMPLE_TYPESTR = re.compile(r"[<|](b1|i[1248]|u[1248]|f[248]|c(8|16)|[US][1-9][0-9]{0,6})")


class ModelFormatError(ValueError):
    """The bytes are not a model this version of Coppice can load."""


def _aligned(n: int) -> int:
    return -(-n // _ALIGNMENT) * _ALIGNMENT


def _describe_dtype(dtype: np.dtype[Any], path: str) -> Any:
    """The JSON form of a dtype: a type string, or the field table of a structured dtype."""
    if dtype.names is None:
        return _simple_typestr(dtype, path)
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    for name in dtype.names:
        field = dtype.fields[name]  # type: ignore[index]
        if len(field) > 2:
            raise TypeError(f"Cannot save {path}: field {name!r} has a title.")
        field_dtype, offset = field[0], field[1]
        if field_dtype.subdtype is not None:
            base, shape = field_dtype.subdtype
            formats.append([_simple_typestr(base, path), list(shape)])
        else:
            formats.append(_simple_typestr(field_dtype, path))
        names.append(name)
        offsets.append(offset)
    return {
        "names": names,
        "formats": formats,
        "offsets": offsets,
        "itemsize": dtype.itemsize,
        "aligned": bool(dtype.isalignedstruct),
    }


def _simple_typestr(dtype: np.dtype[Any], path: str) -> str:
    typestr = dtype.newbyteorder("<").str
    if dtype.names is not None or not _SIMPLE_TYPESTR.fullmatch(typestr):
        raise TypeError(
            f"Cannot save {path}: dtype {dtype} is not supported (bool, integer, float, "
            "complex, fixed-length strings and structured arrays of those are)."
        )
    return typestr


R = TypeVar("R")


def _guarded(step: Callable[..., R], *args: Any) -> R:
    """Run one loading step; whatever a malformed input makes it raise is a format error."""
    try:
        return step(*args)
    except ModelFormatError:
        raise
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
        struct.error,
    ) as exc:
        raise ModelFormatError(f"Malformed model: {type(exc).__name__}: {exc}") from exc


def _check_bytes(data: Any) -> None:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"A model is loaded from bytes; got {type(data).__name__}.")


def _fail(message: str) -> ModelFormatError:
    return ModelFormatError(message)


def _invalid(path: str, message: str) -> ModelFormatError:
    return ModelFormatError(f"{path or 'the model'}: {message}")


def _read_container(data: bytes) -> tuple[dict[str, Any], memoryview]:
    """Check header, digest and manifest; return the manifest and the array data region."""
    buffer = memoryview(data).cast("B")
    if len(buffer) < _HEADER.size + _DIGEST_SIZE:
        raise _fail(f"Not a Coppice model: {len(buffer)} bytes is too short.")
    magic, major, minor, manifest_size = _HEADER.unpack_from(buffer)
    if magic != MAGIC:
        raise _fail("Not a Coppice model: the bytes do not start with the Coppice magic.")
    if major > FORMAT_VERSION[0]:
        raise _fail(
            f"This model was written by a newer Coppice (format {major}.{minor}); this version "
            f"reads format {FORMAT_VERSION[0]}.x. Upgrade Coppice to load it."
        )
    if major < 1:
        raise _fail(f"Unknown model format version {major}.{minor}.")
    body = buffer[:-_DIGEST_SIZE]
    if hashlib.sha256(body).digest() != buffer[-_DIGEST_SIZE:]:
        raise _fail("The model bytes are truncated or corrupted (checksum mismatch).")
    manifest_end = _HEADER.size + manifest_size
    if manifest_end > len(body):
        raise _fail("The manifest length points past the end of the model.")
    text = bytes(body[_HEADER.size : manifest_end]).decode("utf-8")
    manifest = json.loads(text, parse_constant=_reject_constant)
    _check_manifest(manifest, major, minor)
    region = body[_aligned(manifest_end) :]
    if manifest["data_nbytes"] != len(region):
        raise _fail("The array data is not the length the manifest records.")
    return manifest, region


def _reject_constant(name: str) -> Any:
    raise _fail(f"The manifest contains {name}, which JSON does not allow.")


def _check_manifest(manifest: Any, major: int, minor: int) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != "coppice-model":
        raise _fail("The manifest is not a Coppice model manifest.")
    for key, kind in [("class", str), ("saved_with", dict), ("arrays", list), ("state", dict)]:
        if type(manifest.get(key)) is not kind:
            raise _fail(f"The manifest's {key!r} is missing or not a {kind.__name__}.")
    if manifest.get("format_version") != [major, minor]:
        raise _fail("The manifest's format version does not match the header's.")
    if not _is_count(manifest.get("data_nbytes")):
        raise _fail("The manifest's 'data_nbytes' is missing or invalid.")


def _is_count(value: Any, limit: int | None = None) -> bool:
    return type(value) is int and value >= 0 and (limit is None or value <= limit)


def _array_entries(
    entries: list[Any], region_size: int
) -> list[tuple[np.dtype[Any], tuple[int, ...], int, int]]:
    """Validate the array table against the data region: ``(dtype, shape, offset, nbytes)``."""
    checked = []
    for i, entry in enumerate(entries):
        where = f"arrays[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "offset", "nbytes"}:
            raise _fail(f"{where} is not an array entry.")
        dtype = _dtype_from_descr(entry["dtype"], where)
        shape = _shape(entry["shape"], where)
        offset, nbytes = entry["offset"], entry["nbytes"]
        if not (_is_count(offset) and _is_count(nbytes)):
            raise _fail(f"{where} has an invalid offset or length.")
        if math.prod(shape) * dtype.itemsize != nbytes:
            raise _fail(f"{where}: shape {shape} of {dtype} does not take {nbytes} bytes.")
        if offset + nbytes > region_size:
            raise _fail(f"{where} extends past the end of the array data.")
        checked.append((dtype, shape, offset, nbytes))
    return checked


def _shape(shape: Any, where: str) -> tuple[int, ...]:
    if type(shape) is not list or len(shape) > _MAX_NDIM or not all(map(_is_count, shape)):
        raise _fail(f"{where} has an invalid shape.")
    if math.prod(shape) == 0 and any(dim > _MAX_EMPTY_DIM for dim in shape):
        raise _fail(f"{where} has an invalid shape.")
    return tuple(shape)


def _read_arrays(entries: list[Any], region: memoryview, share: bool) -> list[NDArray[Any]]:
    """The arrays of the table: views of ``region`` when ``share`` (a writable buffer handed
    over to the model), else writable copies that do not keep ``region`` alive."""
    arrays = []
    for i, (dtype, shape, offset, nbytes) in enumerate(_array_entries(entries, len(region))):
        array: NDArray[Any] = np.frombuffer(region[offset : offset + nbytes], dtype=dtype)
        # An unaligned view would make the compiled kernels compile anew for unaligned arrays
        # (Numba types alignment); offsets are multiples of 8, so this needs an odd buffer.
        if not (share and array.flags.aligned and array.flags.writeable):
            # A bytearray per array, byte for byte (structured copies made by NumPy skip
            # the padding between fields).
            raw = bytearray(region[offset : offset + nbytes])
            array = np.frombuffer(raw, dtype=dtype)
        array = array.reshape(shape)
        _check_values(array, f"arrays[{i}]")
        arrays.append(array)
    return arrays


def _check_values(array: NDArray[Any], where: str) -> None:
    """Refuse bytes no saved array can hold: they would misbehave later, far from here."""
    if array.dtype.names is not None:
        for name in array.dtype.names:
            _check_values(np.ascontiguousarray(array[name]), where)
        return
    flat = np.ascontiguousarray(array).reshape(-1)
    if array.dtype.kind == "b" and (flat.view(np.uint8) > 1).any():
        raise _fail(f"{where} holds booleans other than 0 and 1.")
    if array.dtype.kind == "U" and (flat.view(np.uint32) > 0x10FFFF).any():
        raise _fail(f"{where} holds invalid Unicode code points.")


def _dtype_from_descr(descr: Any, where: str) -> np.dtype[Any]:
    if type(descr) is str:
        return _simple_dtype(descr, where)
    expected = {"names", "formats", "offsets", "itemsize", "aligned"}
    if type(descr) is not dict or set(descr) != expected:
        raise _fail(f"{where} has an invalid dtype.")
    names, formats, offsets = descr["names"], descr["formats"], descr["offsets"]
    itemsize, aligned = descr["itemsize"], descr["aligned"]
    if not (
        type(names) is list
        and type(formats) is list
        and type(offsets) is list
        and 1 <= len(names) == len(formats) == len(offsets) <= _MAX_FIELDS
        and all(type(name) is str and name for name in names)
        and len(set(names)) == len(names)
        and all(map(_is_count, offsets))
        and _is_count(itemsize, _MAX_ITEMSIZE)
        and itemsize > 0
        and type(aligned) is bool
    ):
        raise _fail(f"{where} has an invalid structured dtype.")
    fields = [_field_dtype(f, where) for f in formats]
    if any(
        offset + field.itemsize > itemsize for offset, field in zip(offsets, fields, strict=True)
    ):
        raise _fail(f"{where}: a field of the structured dtype lies outside its items.")
    spec = {"names": names, "formats": fields, "offsets": offsets, "itemsize": itemsize}
    dtype = np.dtype(spec, align=aligned)  # type: ignore[call-overload]
    if dtype.itemsize != itemsize:
        raise _fail(f"{where} has an inconsistent structured dtype.")
    return dtype


def _field_dtype(spec: Any, where: str) -> np.dtype[Any]:
    if type(spec) is str:
        return _simple_dtype(spec, where)
    if type(spec) is list and len(spec) == 2 and type(spec[0]) is str and type(spec[1]) is list:
        base = _simple_dtype(spec[0], where)
        shape = spec[1]
        if (
            1 <= len(shape) <= _MAX_NDIM
            and all(_is_count(d, _MAX_ITEMSIZE) for d in shape)
            and 0 < math.prod(shape) * base.itemsize <= _MAX_ITEMSIZE
        ):
            return np.dtype((base, tuple(shape)))
    raise _fail(f"{where} has an invalid field type.")


def _simple_dtype(typestr: str, where: str) -> np.dtype[Any]:
    if not _SIMPLE_TYPESTR.fullmatch(typestr):
        raise _fail(f"{where} has an unsupported dtype {typestr[:40]!r}.")
    dtype = np.dtype(typestr)
    if dtype.str != typestr:  # only the canonical spelling the writer produces
        raise _fail(f"{where} has an unsupported dtype {typestr!r}.")
    return dtype
