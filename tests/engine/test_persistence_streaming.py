"""Saving streams a model in pieces, and loading does not hold it twice.

``save_model_pieces`` lays the file out array by array as it is consumed, so writing a large
forest costs the forest plus one tree (or one piece), not the forest again two or three times
(a 100-tree forest on a million noisy rows, ~7 GB, was OOM-killed at 23.7 GB while saving).
``load_model`` of a ``bytearray`` makes the arrays views of it. The format is unchanged (1.0):
artifacts written before streaming, kept in ``persistence_v1_0/``, load and predict as they did.
"""

from __future__ import annotations

import hashlib
import json
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine
from engine import load_model, save_model, save_model_pieces
from engine.tree._tree import NODE_DTYPE
from tests.engine.large_forest import synthetic_forest

GOLDEN = Path(__file__).parent / "persistence_v1_0"
MiB = 1024 * 1024


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    X[rng.random(200) < 0.1, 2] = np.nan
    return X, (X[:, 0] > 0).astype(int)


def _forest() -> Any:
    X, y = _data()
    return engine.RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)


def _parts(data: bytes) -> tuple[dict[str, Any], bytes]:
    """The manifest and the array data of a model file (the layout of _format.py)."""
    (size,) = struct.unpack_from("<I", data, 12)
    start = -(-(16 + size) // 8) * 8
    return json.loads(data[16 : 16 + size]), data[start:-32]


# --- the format is unchanged ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["random_forest_classifier", "gradient_boosting_regressor"])
def test_artifacts_written_before_streaming_load_and_predict_as_they_did(name: str) -> None:
    data = (GOLDEN / f"{name}.cpm").read_bytes()
    recorded = np.load(GOLDEN / "expected.npz", allow_pickle=False)
    X = recorded["X"] if name.endswith("classifier") else np.nan_to_num(recorded["X"])
    for given in (data, bytearray(data)):  # copied arrays, and views of the buffer
        model = load_model(given)
        output = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
        assert output.tobytes() == recorded[name].tobytes()
    # Saved again by the streaming writer: the same manifest (but for the versions it records)
    # and the same array bytes, byte for byte.
    manifest, region = _parts(b"".join(save_model_pieces(model)))
    old_manifest, old_region = _parts(data)
    del manifest["saved_with"], old_manifest["saved_with"]
    assert manifest == old_manifest
    assert region == old_region


# --- saving in pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize("piece_bytes", [1, 7, 4096, 8 * MiB])
def test_pieces_join_to_the_saved_bytes(piece_bytes: int) -> None:
    forest = _forest()
    pieces = save_model_pieces(forest, piece_bytes)
    chunks = [bytes(piece) for piece in pieces]
    data = b"".join(chunks)
    assert data == save_model(forest)
    assert pieces.nbytes == len(data)
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    # Only the header with its manifest may exceed the piece size; arrays are cut to it.
    assert all(len(chunk) <= max(piece_bytes, len(chunks[0])) for chunk in chunks)
    assert b"".join(pieces) == data  # iterable again: the pieces are laid out anew


def test_an_unsupported_value_is_refused_before_a_byte_is_produced() -> None:
    forest = _forest()
    forest.note_ = object()
    with pytest.raises(TypeError, match="note_"):
        save_model_pieces(forest)


def test_a_tree_is_streamed_from_its_own_nodes_not_a_copy() -> None:
    forest = _forest()
    nodes = forest.members_[0].nodes
    assert any(np.shares_memory(np.asarray(piece), nodes) for piece in save_model_pieces(forest))


def test_arrays_not_in_the_file_layout_are_laid_out_one_at_a_time() -> None:
    forest = _forest()
    tree = forest.members_[0]
    big_endian = tree.nodes.astype(NODE_DTYPE.newbyteorder(">"))
    padded = np.zeros(3, dtype=np.dtype([("a", "u1"), ("b", "<f8")], align=True))
    padded.view(np.uint8)[:] = 0xAB  # stale bytes in the padding must not reach the file
    padded["a"], padded["b"] = [1, 2, 3], [0.5, 1.5, 2.5]
    forest.extra_ = {
        "big_endian": big_endian,
        "fortran": np.asfortranarray(np.eye(3)[:, :2]),
        "padded": padded,
    }
    loaded = load_model(b"".join(save_model_pieces(forest, 5)))
    np.testing.assert_array_equal(loaded.extra_["big_endian"], tree.nodes)
    assert loaded.extra_["big_endian"].dtype == NODE_DTYPE
    np.testing.assert_array_equal(loaded.extra_["fortran"], np.eye(3)[:, :2])
    assert loaded.extra_["padded"].tolist() == padded.tolist()
    assert b"\xab" not in loaded.extra_["padded"].tobytes()


# --- memory --------------------------------------------------------------------------------------


def _peak_growth(action: Any) -> int:
    """Bytes allocated (NumPy's included: it reports to tracemalloc) at the peak of
    ``action()`` beyond what was held when it started."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_saving_a_large_forest_holds_one_tree_beyond_it(tmp_path: Path) -> None:
    forest = synthetic_forest(n_trees=24, nodes_per_tree=40_000)  # 24 x 2.6 MB: 62 MB
    tree_bytes = forest.members_[0].nodes.nbytes + forest.members_[0].values.nbytes
    path = tmp_path / "forest.cpm"
    piece_bytes = 1 * MiB

    def stream() -> None:
        with path.open("wb") as sink:
            for piece in save_model_pieces(forest, piece_bytes):
                sink.write(piece)

    growth = _peak_growth(stream)
    size = path.stat().st_size
    assert size > 24 * tree_bytes
    # One tree's worth plus a piece (and the small manifest); the whole-buffer writer this
    # replaces held three copies of the forest's bytes.
    assert growth <= tree_bytes + piece_bytes + 1 * MiB, (growth, size)

    # Loading from a buffer the size of the file costs that buffer: the arrays are its views.
    def load() -> Any:
        buffer = bytearray(size)
        with path.open("rb") as source:
            source.readinto(buffer)
        loaded.append(load_model(buffer))

    loaded: list[Any] = []
    growth = _peak_growth(load)
    assert growth <= size + 2 * tree_bytes + 1 * MiB, (growth, size)
    for original, back in zip(forest.members_, loaded[0].members_, strict=True):
        assert back.nodes.tobytes() == original.nodes.tobytes()
        np.testing.assert_array_equal(back.values, original.values)


def test_a_model_loaded_from_a_bytearray_is_made_of_views_of_it() -> None:
    X, _ = _data()
    forest = _forest()
    buffer = bytearray(save_model(forest))
    shared = load_model(buffer)
    assert all(np.shares_memory(m.nodes, np.frombuffer(buffer, np.uint8)) for m in shared.members_)
    assert all(m.nodes.flags.writeable and m.nodes.flags.aligned for m in shared.members_)
    np.testing.assert_array_equal(shared.predict_proba(X), forest.predict_proba(X))
    copied = load_model(bytes(buffer))
    assert not any(
        np.shares_memory(m.nodes, np.frombuffer(buffer, np.uint8)) for m in copied.members_
    )
    assert all(m.nodes.flags.writeable for m in copied.members_)
