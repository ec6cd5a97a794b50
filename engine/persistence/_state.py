"""A model's attributes as the manifest's ``state``: a JSON value tree, and back.

``state`` is the value tree: JSON ``null``/booleans/strings/integers/finite floats/lists
stand for themselves; every other value is an object ``{"$t": tag, ...}`` (tags: ``float`` for
nan and inf, ``tuple``, ``dict`` for str keys, ``pairs`` for other keys, ``array`` and ``scalar``
referring to ``arrays``, ``objects`` for object arrays of plain scalars, ``dtype``, ``seedseq``
and ``object`` for a registered class with its attributes).

Saving accepts only the values listed; loading checks each node's shape before trusting it and
instantiates only registered classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.persistence._format import (
    _describe_dtype,
    _dtype_from_descr,
    _invalid,
    _is_count,
    _shape,
)
from engine.persistence._registry import _REGISTRY, qualified_name

_MAX_DEPTH = 64  # far deeper than any real model; stops cycles and forged nesting alike
_MAX_POOL_SIZE = 2**16
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_SCALAR_TYPES = (bool, int, float, str)


def stored_layout(array: NDArray[Any]) -> NDArray[Any]:
    """``array`` as the file holds it: little-endian, C order, padding between structured
    fields zeroed. The array itself when it already is (a tree's packed node records, float
    and integer arrays of a fitted model), else a copy of this one array.
    """
    dtype = array.dtype.newbyteorder("<")
    if array.dtype == dtype and array.flags.c_contiguous and not _has_padding(dtype):
        return array
    if dtype.names is not None:
        # NumPy copies structured arrays field by field and leaves the padding between
        # fields as it finds it, often stale memory; zeroed padding keeps the bytes
        # deterministic and free of whatever the process had there.
        normalised: NDArray[Any] = np.zeros(array.shape, dtype=dtype)
        np.copyto(normalised, array)
        return normalised
    return np.asarray(array, dtype=dtype, order="C")


def _has_padding(dtype: np.dtype[Any]) -> bool:
    """Whether a structured dtype's items hold bytes that belong to no field."""
    if dtype.names is None:
        return False
    fields = sorted((field[1], field[0].itemsize) for field in dtype.fields.values())  # type: ignore[union-attr]
    end = 0
    for offset, size in fields:
        if offset != end:
            return True
        end = offset + size
    return end != dtype.itemsize


class _Writer:
    """Turns a value into its JSON node, collecting (not copying) the arrays it refers to."""

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
        # Only described and held here: the bytes are laid out when they are written, one
        # array at a time (``stored_layout``), so a save never holds a copy of the model.
        dtype = array.dtype.newbyteorder("<")
        self.descrs.append(_describe_dtype(dtype, path))
        self.arrays.append(array)
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
