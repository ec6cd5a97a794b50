"""Save fitted engine models as bytes and load them back, without pickle.

``save_model(model) -> bytes`` records every attribute of the model (``vars(model)``: the
constructor parameters, the fitted ``name_`` attributes and private ``_name`` state), nested
engine objects included; ``load_model(data)`` rebuilds an equal model that predicts
bit-identically. Loading never runs code from the bytes: only classes registered with
:func:`register_model_class` are instantiated (by ``cls.__new__`` and ``__dict__``, without
``__init__``), every length is checked against the buffer before it is used, and anything
malformed raises :class:`ModelFormatError`.

The byte layout and the manifest are described in :mod:`engine.persistence._format`, the value
tree that holds a model's attributes in :mod:`engine.persistence._state`, and the classes a model
may name in :mod:`engine.persistence._registry`.
"""

from __future__ import annotations

import hashlib
import json
import platform
from typing import Any

import numpy as np

from engine.persistence._format import (
    _HEADER,
    FORMAT_VERSION,
    MAGIC,
    ModelFormatError,
    _aligned,
    _array_entries,
    _check_bytes,
    _guarded,
    _read_arrays,
    _read_container,
)
from engine.persistence._registry import (
    _REGISTRY,
    qualified_name,
    register_model_class,
    registered_class,
)
from engine.persistence._state import _Reader, _Writer

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


# --- loading -------------------------------------------------------------------------------------


def load_model(data: bytes | bytearray) -> Any:
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
