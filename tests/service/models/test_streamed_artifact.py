"""A model streamed into the data store (local disk and a real S3 server) and loaded back.

The fit process writes ``engine.save_model_pieces`` through ``write_artifact``: the object is
exactly ``save_model``'s bytes, its size and SHA-256 computed in the pass that writes it, the
model never held twice. On S3 a forest larger than one upload part goes up as a multipart
upload piece by piece. Reading back (``read_artifact`` then ``load_model``) costs the artifact's
size once: the model's arrays are views of the buffer read.
"""

from __future__ import annotations

import hashlib
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest

import engine
from service.models.artifacts import READ_PIECE_BYTES, read_artifact, write_artifact
from service.store import DataStore
from tests.engine.large_forest import synthetic_forest

MiB = 1024 * 1024


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> DataStore:
    if kind == "local":
        return DataStore(str(tmp_path / "store"))
    server: Any = request.getfixturevalue("s3_server")
    return DataStore(server.url(f"streamed-{uuid.uuid4().hex[:8]}"), server.options)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_forest_streamed_into_the_store_is_its_saved_bytes_and_loads(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    forest = synthetic_forest(n_trees=6, nodes_per_tree=60_000)  # 23 MB: several S3 parts
    store = _store(kind, tmp_path, request)
    whole = engine.save_model(forest)
    try:
        stored = write_artifact(store, "m1", engine.save_model_pieces(forest, 1 * MiB))
        assert (stored.path, stored.size) == ("models/m1/model.cpm", len(whole))
        assert stored.sha256 == hashlib.sha256(whole).hexdigest()
        assert store.get(stored) == whole
        loaded = engine.load_model(read_artifact(store, stored))
        for original, back in zip(forest.members_, loaded.members_, strict=True):
            assert back.nodes.tobytes() == original.nodes.tobytes()
            assert back.values.tobytes() == original.values.tobytes()
    finally:
        store.delete_prefix("models/m1/")


def test_a_model_read_from_the_store_costs_its_size_once(tmp_path: Path) -> None:
    forest = synthetic_forest(n_trees=16, nodes_per_tree=40_000)  # 42 MB
    tree_bytes = forest.members_[0].nodes.nbytes + forest.members_[0].values.nbytes
    store = DataStore(str(tmp_path / "store"))
    stored = write_artifact(store, "m2", engine.save_model_pieces(forest))
    del forest
    loaded: list[Any] = []
    tracemalloc.start()
    try:
        loaded.append(engine.load_model(read_artifact(store, stored)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The buffer (which the model's arrays then view) plus a read piece or two and one
    # tree's checks; copying the arrays out of the buffer would be twice the size.
    assert peak <= stored.size + 2 * READ_PIECE_BYTES + 2 * tree_bytes + 1 * MiB, peak
    assert len(loaded[0].members_) == 16
