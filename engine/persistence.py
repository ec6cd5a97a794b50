"""Save fitted engine models as bytes and load them back, without pickle.

``save_model(model) -> bytes`` records every attribute of the model (``vars(model)``: the
constructor parameters, the fitted ``name_`` attributes and private ``_name`` state), nested
engine objects included; ``load_model(data)`` rebuilds an equal model that predicts
bit-identically. Loading never runs code from the bytes: only classes registered with
:func:`register_model_class` are instantiated (by ``cls.__new__`` and ``__dict__``, without
``__init__``), every length is checked against the buffer before it is used, and anything
malformed raises :class:`ModelFormatError`.

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
``state`` is the value tree: JSON ``null``/booleans/strings/integers/finite floats/lists
stand for themselves; every other value is an object ``{"$t": tag, ...}`` (tags: ``float`` for
nan and inf, ``tuple``, ``dict`` for str keys, ``pairs`` for other keys, ``array`` and ``scalar``
referring to ``arrays``, ``objects`` for object arrays of plain scalars, ``dtype``, ``seedseq``
and ``object`` for a registered class with its attributes).

The digest detects truncation and corruption, not tampering: anyone can write a valid file,
which is why the reader trusts nothing in it.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import re
import struct
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "FORMAT_VERSION",
    "ModelFormatError",
    "load_model",
    "model_manifest",
    "qualified_name",
    "register_model_class",
    "registered_class",
    "save_model",
]

MAGIC = b"COPPICE\0"
FORMAT_VERSION = (1, 0)
_HEADER = struct.Struct("<8sHHI")
_DIGEST_SIZE = hashlib.sha256().digest_size
_ALIGNMENT = 8
_MAX_DEPTH = 64  # far deeper than any real model; stops cycles and forged nesting alike
_MAX_NDIM = 32
_MAX_EMPTY_DIM = 2**31  # a dimension of an array with no elements has no size to check against
_MAX_FIELDS = 4096
_MAX_ITEMSIZE = 2**24
_MAX_POOL_SIZE = 2**16
_SIMPLE_TYPESTR = re.compile(r"[<|](b1|i[1248]|u[1248]|f[248]|c(8|16)|[US][1-9][0-9]{0,6})")
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_SCALAR_TYPES = (bool, int, float, str)

C = TypeVar("C", bound=type)


class ModelFormatError(ValueError):
    """The bytes are not a model this version of Coppice can load."""


_REGISTRY: dict[str, type] = {}


def qualified_name(cls: type) -> str:
    """The name a class is saved under, e.g. ``"engine.tree.DecisionTreeClassifier"``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def register_model_class(cls: C) -> C:
    """Allow instances of ``cls`` to be saved and loaded; usable as a class decorator.

    Register every estimator and every helper class an estimator keeps as an attribute (a bin
    mapper, a tree). Attributes named in the class attribute ``_persistence_exclude`` (a tuple
    of names) are not saved; the class must rebuild them on demand.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_model_class expects a class; got {cls!r}.")
    name = qualified_name(cls)
    if "<" in name:
        raise ValueError(f"{name} is local to a function; only module-level classes can load.")
    _REGISTRY[name] = cls
    return cls


def registered_class(name: str) -> type:
    """The class registered under ``name``; :class:`KeyError` if there is none."""
    return _REGISTRY[name]


# --- saving --------------------------------------------------------------------------------------


def save_model(model: Any) -> bytes:
    """Serialise ``model``, an instance of a registered class, to bytes.

    Raises
    ------
    TypeError
        If the class is not registered, or an attribute holds a value the format cannot
        represent; the message names the attribute path, e.g. ``estimators_[3].tree_``.
    """
    if _REGISTRY.get(qualified_name(type(model))) is not type(model):
        raise TypeError(
            f"{qualified_name(type(model))} is not a registered model class; "
            "decorate it with @register_model_class."
        )
    writer = _Writer()
    state = writer.value(model, "", 0)
    entries, offset = [], 0
    for array, descr in zip(writer.arrays, writer.descrs, strict=True):
        offset = _aligned(offset)
        entries.append(
            {
                "dtype": descr,
                "shape": list(array.shape),
                "offset": offset,
                "nbytes": array.nbytes,
            }
        )
        offset += array.nbytes
    manifest = {
        "format": "coppice-model",
        "format_version": list(FORMAT_VERSION),
        "class": qualified_name(type(model)),
        "saved_with": {"numpy": np.__version__, "python": platform.python_version()},
        "arrays": entries,
        "data_nbytes": offset,
        "state": state,
    }
    text = json.dumps(manifest, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    if len(text) >= 2**32:
        raise ValueError("The model's manifest exceeds 4 GiB; the format cannot hold it.")
    header = _HEADER.pack(MAGIC, *FORMAT_VERSION, len(text))
    parts = [header, text.encode("ascii"), bytes(_aligned(len(text)) - len(text))]
    position = 0  # within the array data
    for entry, array in zip(entries, writer.arrays, strict=True):
        parts.append(bytes(entry["offset"] - position))
        parts.append(array.tobytes())
        position = entry["offset"] + entry["nbytes"]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _aligned(n: int) -> int:
    return -(-n // _ALIGNMENT) * _ALIGNMENT


class _Writer:
    """Turns a value into its JSON node, collecting the arrays it refers to."""

    def __init__(self) -> None:
        self.arrays: list[NDArray[Any]] = []
        self.descrs: list[Any] = []
        # id(array) -> (array, ref): the array is held so that its id cannot be reused.
        self.written: dict[int, tuple[NDArray[Any], int]] = {}

    def value(self, value: Any, path: str, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise TypeError(f"Cannot save {path}: nested too deeply (a reference cycle?).")
        kind = type(value)
        # Exact types: a subclass (an IntEnum, a float64 scalar) would come back as its base.
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return value if math.isfinite(value) else {"$t": "float", "v": repr(value)}
        if isinstance(value, np.generic):
            return {"$t": "scalar", "ref": self.array(np.asarray(value), path)}
        if kind is np.ndarray:
            if value.dtype.hasobject:
                return self.objects(value, path, depth)
            return {"$t": "array", "ref": self.shared_array(value, path)}
        if isinstance(value, np.dtype):
            return {"$t": "dtype", "descr": _describe_dtype(value, path)}
        if kind is list:
            return [self.value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
        if kind is tuple:
            items = [self.value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
            return {"$t": "tuple", "v": items}
        if kind is dict:
            return self.mapping(value, path, depth)
        if kind is np.random.SeedSequence:
            return _describe_seed_sequence(value)
        if _REGISTRY.get(qualified_name(kind)) is kind:
            return self.instance(value, path, depth)
        raise TypeError(
            f"Cannot save {path or 'the model'}: values of type {qualified_name(kind)} are not "
            "supported (register the class, or list the attribute in _persistence_exclude)."
        )

    def shared_array(self, array: NDArray[Any], path: str) -> int:
        """The ref of ``array``, written once however many attributes hold this object."""
        seen = self.written.get(id(array))
        if seen is not None:
            return seen[1]
        ref = self.array(array, path)
        self.written[id(array)] = (array, ref)
        return ref

    def array(self, array: NDArray[Any], path: str) -> int:
        dtype = array.dtype.newbyteorder("<")
        self.descrs.append(_describe_dtype(dtype, path))
        if dtype.names is not None:
            # NumPy copies structured arrays field by field and leaves the padding between
            # fields as it finds it, often stale memory; zeroed padding keeps the bytes
            # deterministic and free of whatever the process had there.
            normalised: NDArray[Any] = np.zeros(array.shape, dtype=dtype)
            np.copyto(normalised, array)
            array = normalised
        self.arrays.append(np.asarray(array, dtype=dtype, order="C"))
        return len(self.arrays) - 1

    def objects(self, array: NDArray[Any], path: str, depth: int) -> Any:
        items = []
        for i, item in enumerate(array.reshape(-1).tolist()):
            if type(item) not in _SCALAR_TYPES:
                raise TypeError(
                    f"Cannot save {path}: an object array may hold only str, int, float and "
                    f"bool; element {i} is a {qualified_name(type(item))}."
                )
            items.append(self.value(item, f"{path}[{i}]", depth + 1))
        return {"$t": "objects", "shape": list(array.shape), "v": items}

    def mapping(self, mapping: dict[Any, Any], path: str, depth: int) -> Any:
        if all(type(key) is str for key in mapping):
            items = {
                key: self.value(v, f"{path}[{key!r}]", depth + 1) for key, v in mapping.items()
            }
            return {"$t": "dict", "v": items}
        pairs = []
        for key, v in mapping.items():
            if not _is_plain_key(key):
                raise TypeError(f"Cannot save {path}: dict key {key!r} is not a plain scalar.")
            where = f"{path}[{key!r}]"
            pairs.append([self.value(key, where, depth + 1), self.value(v, where, depth + 1)])
        return {"$t": "pairs", "v": pairs}

    def instance(self, obj: Any, path: str, depth: int) -> Any:
        excluded = set(getattr(type(obj), "_persistence_exclude", ()))
        try:
            attributes = vars(obj)
        except TypeError:
            raise TypeError(f"Cannot save {path}: {type(obj).__name__} has no __dict__.") from None
        state = {
            name: self.value(value, f"{path}.{name}" if path else name, depth + 1)
            for name, value in attributes.items()
            if name not in excluded
        }
        return {"$t": "object", "class": qualified_name(type(obj)), "attrs": state}


def _is_plain_key(key: Any) -> bool:
    # Hashing anything richer on load could run a registered class's __hash__.
    if key is None or type(key) in _SCALAR_TYPES or isinstance(key, np.generic):
        return True
    return type(key) is tuple and all(_is_plain_key(k) for k in key)


def _describe_seed_sequence(seed: np.random.SeedSequence) -> dict[str, Any]:
    entropy: Any = seed.entropy
    return {
        "$t": "seedseq",
        "entropy": int(entropy) if np.ndim(entropy) == 0 else [int(e) for e in entropy],
        "spawn_key": [int(k) for k in seed.spawn_key],
        "pool_size": int(seed.pool_size),
        "n_children_spawned": int(seed.n_children_spawned),
    }


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


# --- loading -------------------------------------------------------------------------------------


def load_model(data: bytes) -> Any:
    """Rebuild the model :func:`save_model` wrote into ``data``.

    Arrays are copies, not views of ``data``: writable like freshly fitted ones, and the model
    does not keep the whole buffer alive.

    Raises
    ------
    ModelFormatError
        If ``data`` is truncated, corrupted, not a Coppice model, written by a newer major
        format version, or names a class that is not registered.
    """
    _check_bytes(data)
    manifest, region = _guarded(_read_container, data)
    arrays = _guarded(_read_arrays, manifest["arrays"], region)
    model = _guarded(_Reader(arrays).value, manifest["state"], "", 0)
    if qualified_name(type(model)) != manifest["class"]:
        raise ModelFormatError("The manifest's class does not match the saved state.")
    return model


def model_manifest(data: bytes) -> dict[str, Any]:
    """What ``data`` holds (class, versions, sizes), read without building the model.

    Validates the container as :func:`load_model` does, short of decoding the state.
    """
    _check_bytes(data)
    manifest, region = _guarded(_read_container, data)
    entries = _guarded(_array_entries, manifest["arrays"], len(region))
    return {
        "class": manifest["class"],
        "format_version": ".".join(map(str, manifest["format_version"])),
        "saved_with": manifest["saved_with"],
        "n_arrays": len(entries),
        "array_nbytes": sum(entry[3] for entry in entries),
        "total_nbytes": len(data),
    }


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


def _read_arrays(entries: list[Any], region: memoryview) -> list[NDArray[Any]]:
    arrays = []
    for i, (dtype, shape, offset, nbytes) in enumerate(_array_entries(entries, len(region))):
        # A bytearray per array: a writable copy, byte for byte (structured copies made by
        # NumPy skip the padding between fields), that does not keep `data` alive.
        raw = bytearray(region[offset : offset + nbytes])
        array: NDArray[Any] = np.frombuffer(raw, dtype=dtype).reshape(shape)
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


class _Reader:
    """Rebuilds values from JSON nodes, checking each node's shape before trusting it."""

    def __init__(self, arrays: list[NDArray[Any]]) -> None:
        self.arrays = arrays
        self._tags: dict[str, Callable[[dict[str, Any], str, int], Any]] = {
            "float": self.non_finite,
            "tuple": self.tuple_,
            "dict": self.dict_,
            "pairs": self.pairs,
            "array": self.array,
            "scalar": self.scalar,
            "objects": self.objects,
            "dtype": self.dtype,
            "seedseq": self.seed_sequence,
            "object": self.instance,
        }

    def value(self, node: Any, path: str, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise _invalid(path, "nested too deeply.")
        if node is None or type(node) in _SCALAR_TYPES:
            return node
        if type(node) is list:
            return [self.value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node)]
        if type(node) is not dict or type(node.get("$t")) is not str:
            raise _invalid(path, "not a valid value.")
        handler = self._tags.get(node["$t"])
        if handler is None:
            raise _invalid(path, f"unknown value type {node['$t'][:40]!r} (a newer Coppice?).")
        return handler(node, path, depth)

    @staticmethod
    def fields(node: dict[str, Any], path: str, *names: str) -> list[Any]:
        if set(node) != {"$t", *names}:
            raise _invalid(path, f"a {node['$t']!r} value needs exactly {sorted(names)}.")
        return [node[name] for name in names]

    def non_finite(self, node: dict[str, Any], path: str, depth: int) -> float:
        (text,) = self.fields(node, path, "v")
        if type(text) is not str or text not in _NON_FINITE:
            raise _invalid(path, "invalid special float.")
        return _NON_FINITE[text]

    def items(self, items: Any, path: str, depth: int) -> list[Any]:
        if type(items) is not list:
            raise _invalid(path, "expected a list.")
        return [self.value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(items)]

    def tuple_(self, node: dict[str, Any], path: str, depth: int) -> tuple[Any, ...]:
        (items,) = self.fields(node, path, "v")
        return tuple(self.items(items, path, depth))

    def dict_(self, node: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        (items,) = self.fields(node, path, "v")
        if type(items) is not dict:
            raise _invalid(path, "expected a mapping.")
        return {key: self.value(v, f"{path}[{key!r}]", depth + 1) for key, v in items.items()}

    def pairs(self, node: dict[str, Any], path: str, depth: int) -> dict[Any, Any]:
        (pairs,) = self.fields(node, path, "v")
        if type(pairs) is not list or not all(type(p) is list and len(p) == 2 for p in pairs):
            raise _invalid(path, "expected a list of key-value pairs.")
        result = {}
        for key_node, value_node in pairs:
            key = self.value(key_node, f"{path}.keys()", depth + 1)
            if not _is_plain_key(key):
                raise _invalid(path, "a dict key must be a plain scalar.")
            result[key] = self.value(value_node, f"{path}[{key!r}]", depth + 1)
        return result

    def array(self, node: dict[str, Any], path: str, depth: int) -> NDArray[Any]:
        (ref,) = self.fields(node, path, "ref")
        if not _is_count(ref, len(self.arrays) - 1):
            raise _invalid(path, "array reference out of range.")
        return self.arrays[ref]

    def scalar(self, node: dict[str, Any], path: str, depth: int) -> Any:
        array = self.array(node, path, depth)
        if array.ndim != 0:
            raise _invalid(path, "a scalar must refer to a 0-d array.")
        return array[()]

    def objects(self, node: dict[str, Any], path: str, depth: int) -> NDArray[Any]:
        shape, items = self.fields(node, path, "shape", "v")
        values = self.items(items, path, depth)
        shape = _shape(shape, path)
        if math.prod(shape) != len(values) or not all(type(v) in _SCALAR_TYPES for v in values):
            raise _invalid(path, "invalid object array.")
        flat = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):
            flat[i] = value
        return flat.reshape(shape)

    def dtype(self, node: dict[str, Any], path: str, depth: int) -> np.dtype[Any]:
        (descr,) = self.fields(node, path, "descr")
        return _dtype_from_descr(descr, path)

    def seed_sequence(self, node: dict[str, Any], path: str, depth: int) -> Any:
        names = ("entropy", "spawn_key", "pool_size", "n_children_spawned")
        entropy, spawn_key, pool_size, n_spawned = self.fields(node, path, *names)
        valid = (
            (_is_count(entropy) or (type(entropy) is list and all(map(_is_count, entropy))))
            and type(spawn_key) is list
            and all(map(_is_count, spawn_key))
            and _is_count(pool_size, _MAX_POOL_SIZE)
            and _is_count(n_spawned)
        )
        if not valid:
            raise _invalid(path, "invalid SeedSequence.")
        return np.random.SeedSequence(
            entropy, spawn_key=spawn_key, pool_size=pool_size, n_children_spawned=n_spawned
        )

    def instance(self, node: dict[str, Any], path: str, depth: int) -> Any:
        name, attributes = self.fields(node, path, "class", "attrs")
        cls: Any = _REGISTRY.get(name) if type(name) is str else None
        if cls is None:
            shown = name[:100] if type(name) is str else name
            raise _invalid(path, f"class {shown!r} is not a registered model class.")
        if type(attributes) is not dict or not all(key.isidentifier() for key in attributes):
            raise _invalid(path, "invalid attributes.")
        state = {
            key: self.value(v, f"{path}.{key}" if path else key, depth + 1)
            for key, v in attributes.items()
        }
        obj = cls.__new__(cls)
        obj.__dict__.update(state)
        return obj
