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
from collections.abc import Iterator
from typing import Any

import numpy as np

from engine.persistence._format import (
    _DIGEST_SIZE,
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
from engine.persistence._state import _Reader, _Writer, stored_layout

__all__ = [
    "FORMAT_VERSION",
    "PIECE_BYTES",
    "ModelFormatError",
    "ModelPieces",
    "load_model",
    "model_manifest",
    "qualified_name",
    "register_model_class",
    "registered_class",
    "save_model",
    "save_model_pieces",
]


# --- saving --------------------------------------------------------------------------------------

# The largest piece :class:`ModelPieces` hands out: an upload buffer (fsspec's S3 writer copies
# what it is given until a part is full) never takes more than this of one big array at once.
PIECE_BYTES = 8 * 1024 * 1024


class ModelPieces:
    """A model's saved bytes as an iterable of pieces, laid out as they are consumed.

    Iterating yields the header with the manifest, then each array's bytes (views of the
    model's own arrays where they are already in the file's layout, so a tree costs nothing
    extra; otherwise a copy of that one array), at most ``piece_bytes`` a piece, then the
    SHA-256 trailer, computed on the way. Joined, the pieces are exactly :func:`save_model`'s
    bytes (format 1.0: nothing changes for readers). ``nbytes`` is their total length, known
    before a byte is produced. Peak memory while iterating is the model plus one array (or one
    piece), however large the model: the whole file is never held.

    Consume the pieces before the model changes: they are read from it as they are produced.
    """

    def __init__(
        self, head: bytes, arrays: list[Any], entries: list[dict[str, Any]], piece_bytes: int
    ) -> None:
        self._head = head
        self._arrays = arrays
        self._entries = entries
        self._piece_bytes = piece_bytes
        data_nbytes = entries[-1]["offset"] + entries[-1]["nbytes"] if entries else 0
        self.nbytes = len(head) + data_nbytes + _DIGEST_SIZE

    def __iter__(self) -> Iterator[bytes | memoryview]:
        digest = hashlib.sha256(self._head)
        yield self._head
        position = 0  # within the array data
        for entry, array in zip(self._entries, self._arrays, strict=True):
            gap = bytes(entry["offset"] - position)
            if gap:
                digest.update(gap)
                yield gap
            # One array in the file's layout; a view of the model's own when it already is.
            raw = stored_layout(array).reshape(-1).view(np.uint8).data
            for start in range(0, len(raw), self._piece_bytes):
                piece = raw[start : start + self._piece_bytes]
                digest.update(piece)
                yield piece
            position = entry["offset"] + entry["nbytes"]
        yield digest.digest()


def save_model_pieces(model: Any, piece_bytes: int = PIECE_BYTES) -> ModelPieces:
    """``model``'s saved bytes as pieces to stream (into a file or the data store) without
    ever holding them whole: see :class:`ModelPieces`.

    The model is walked here, so an unsupported value raises now, before any byte is written.

    Raises
    ------
    TypeError
        As :func:`save_model`.
    """
    if piece_bytes < 1:
        raise ValueError(f"piece_bytes must be positive; got {piece_bytes}.")
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
        nbytes = array.size * array.dtype.itemsize
        entries.append(
            {"dtype": descr, "shape": list(array.shape), "offset": offset, "nbytes": nbytes}
        )
        offset += nbytes
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
    head = b"".join(
        [
            _HEADER.pack(MAGIC, *FORMAT_VERSION, len(text)),
            text.encode("ascii"),
            bytes(_aligned(len(text)) - len(text)),
        ]
    )
    return ModelPieces(head, writer.arrays, entries, piece_bytes)


def save_model(model: Any) -> bytes:
    """Serialise ``model``, an instance of a registered class, to bytes.

    Holds the model and its bytes at once; to write a large model to a file or the data store,
    stream :func:`save_model_pieces` instead.

    Raises
    ------
    TypeError
        If the class is not registered, or an attribute holds a value the format cannot
        represent; the message names the attribute path, e.g. ``estimators_[3].tree_``.
    """
    # bytes.join sizes the result once and copies each piece (mostly views of the model's
    # arrays) into it: the model plus one copy of its bytes.
    return b"".join(save_model_pieces(model))


# --- loading -------------------------------------------------------------------------------------


def load_model(data: bytes | bytearray) -> Any:
    """Rebuild the model :func:`save_model` wrote into ``data``.

    From a ``bytearray`` (what the service reads an artifact into), the model's arrays are
    views of it: the buffer becomes the model's memory, so a multi-GiB model costs its size
    once, not twice (the buffer plus copies), and the arrays are writable like freshly fitted
    ones. The buffer must not be changed afterwards. From ``bytes`` (read-only) or a view of
    someone else's buffer, the arrays are copies.

    Raises
    ------
    ModelFormatError
        If ``data`` is truncated, corrupted, not a Coppice model, written by a newer major
        format version, or names a class that is not registered.
    """
    _check_bytes(data)
    manifest, region = _guarded(_read_container, data)
    # Views only of a buffer the caller hands over whole: a memoryview may be of memory that
    # someone else goes on changing.
    share = isinstance(data, bytearray)
    arrays = _guarded(_read_arrays, manifest["arrays"], region, share)
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
