"""Model artifacts in the data store: where each model's bytes live and how they are read.

A model's artifact (``engine.save_model`` bytes, streamed as ``engine.save_model_pieces``) is the object ``models/<model id>/model.cpm``;
its row in ``model_artifacts`` names it with its size and SHA-256. The fit process writes the
object before the worker commits that row (``service.store``: bytes first, row after), so
there is no size ceiling but the store's own (PostgreSQL's ``bytea`` and SQLite's BLOB stop at
1 GB a value). Reads are verified to the last byte; a damaged or missing object is
``ArtifactCorrupt`` naming it, never a wrong model.
"""

from __future__ import annotations

from collections.abc import Iterable

from service.store import DataStore, StoredObject

# Read in pieces this large: few round trips to S3, little memory beyond the artifact itself.
READ_PIECE_BYTES = 16 * 1024 * 1024
# Artifacts up to this size are read through after the fit to check their SHA-256 (a second
# at most); larger ones by their size in the store (``verify_artifact``).
FULL_CHECK_BYTES = 256 * 1024 * 1024


def model_prefix(model_id: str) -> str:
    """Every object of one model lives under this prefix."""
    return f"models/{model_id}/"


def artifact_path(model_id: str) -> str:
    return f"{model_prefix(model_id)}model.cpm"


def write_artifact(
    store: DataStore, model_id: str, data: bytes | bytearray | Iterable[bytes | memoryview]
) -> StoredObject:
    """Write a model's artifact to the store, whole or streamed in pieces
    (``engine.save_model_pieces``, the model never held twice); the object the row will name
    (its size and SHA-256 computed in the pass that writes it)."""
    if isinstance(data, bytes | bytearray):
        return store.put(artifact_path(model_id), data)
    with store.writer(artifact_path(model_id)) as writer:
        for piece in data:
            writer.write(piece)
    return writer.stored()


def read_artifact(store: DataStore, stored: StoredObject) -> bytearray:
    """The artifact's bytes, verified against its size and SHA-256 as they are read.

    One buffer of the recorded size is filled in place, and ``engine.load_model`` makes the
    model's arrays views of that ``bytearray``: a multi-GiB artifact costs its size in memory
    once (the buffer is the model), not twice, while it is read and loaded.
    Raises ``ObjectCorrupt``/``ObjectMissing`` naming the object, ``StoreUnavailable``.
    """
    buffer = bytearray(stored.size)
    view = memoryview(buffer)
    at = 0
    # The verifying reader raises before it hands out a byte past the recorded size.
    for piece in store.chunks(stored, READ_PIECE_BYTES):
        view[at : at + len(piece)] = piece
        at += len(piece)
    return buffer


def verify_artifact(store: DataStore, stored: StoredObject) -> None:
    """Check, before a job's model row names it, that the object the fit process reported
    writing is in the store as recorded. Raises ``ObjectCorrupt``/``ObjectMissing`` naming it.

    Every artifact must be there with its recorded size (the store's metadata: a missing,
    truncated or half-written object is refused at once). One of at most ``FULL_CHECK_BYTES``
    is also read through and its SHA-256 checked (memory: one piece). A larger one is not:
    its size and SHA-256 were computed by the fit process in the pass that wrote the bytes
    (``HashingWriter``), a size-preserving change in the seconds since would take a failing
    disk or store, and every read of it (``read_artifact``, each load to predict) checks the
    SHA-256 to the last byte, so a damaged artifact is still an error naming the object,
    never a wrong model: at its first load rather than at the job's end. Reading it here
    costs a full read for each fit: 1.7 s for 2 GiB from the page cache at load 9
    (``benchmarks.artifact_verify``), a 7 GB forest's read from S3 or a cold disk on top.
    """
    store.check_size(stored)
    if stored.size <= FULL_CHECK_BYTES:
        for _ in store.chunks(stored, READ_PIECE_BYTES):
            pass


def delete_objects(store: DataStore, paths: Iterable[str]) -> list[str]:
    """Delete objects no row names any more; the paths that could not be (gc sweeps them)."""
    left: list[str] = []
    for path in paths:
        try:
            store.delete(path)
        except Exception:  # best effort: the store may be away; gc covers it
            left.append(path)
    return left
