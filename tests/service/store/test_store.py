"""The data store on a local directory and on a real S3 server (SeaweedFS on loopback)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.config import Settings
from service.store import (
    DataStore,
    ObjectCorrupt,
    ObjectMissing,
    StoredObject,
    StoreUnavailable,
    store_from_settings,
)
from service.store.wait import wait_for_store
from tests.s3server import S3Server


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DataStore]:
    """The same tests on both kinds of root."""
    if request.param == "local":
        yield DataStore(str(tmp_path / "store"))
        return
    server: S3Server = request.getfixturevalue("s3_server")
    yield DataStore(server.url(f"tests/{uuid.uuid4().hex}"), server.options)


def test_put_then_get_gives_the_bytes_and_their_digest(store: DataStore) -> None:
    data = bytes(range(256)) * 4099
    stored = store.put("models/m1/model.cpm", data)
    assert stored == StoredObject(
        "models/m1/model.cpm", len(data), hashlib.sha256(data).hexdigest()
    )
    assert store.get(stored) == data
    assert b"".join(store.chunks(stored, size=1000)) == data


def test_streamed_writer_names_what_it_wrote(store: DataStore) -> None:
    with store.writer("datasets/d1/part-00000.parquet") as writer:
        for piece in (b"abc", b"", b"defg" * 1000):
            writer.write(piece)
    stored = writer.stored()
    expected = b"abc" + b"defg" * 1000
    assert stored.size == len(expected)
    assert stored.sha256 == hashlib.sha256(expected).hexdigest()
    assert [info.path for info in store.walk()] == ["datasets/d1/part-00000.parquet"]


def test_a_writer_that_raises_leaves_no_object(store: DataStore) -> None:
    with pytest.raises(RuntimeError), store.writer("datasets/d2/part-00000.parquet") as writer:
        writer.write(b"half of a part")
        raise RuntimeError("the upload broke off")
    assert list(store.walk()) == []


def test_changed_bytes_are_an_error_naming_the_object(store: DataStore) -> None:
    stored = store.put("models/m2/model.cpm", b"the real artifact")
    store.put("models/m2/model.cpm", b"the real artifacT")  # same size, one byte flipped
    with pytest.raises(ObjectCorrupt, match=re.escape("models/m2/model.cpm")):
        store.get(stored)
    store.put("models/m2/model.cpm", b"the real artifact, and more")
    with pytest.raises(ObjectCorrupt, match=re.escape("models/m2/model.cpm")):
        store.get(stored)
    store.put("models/m2/model.cpm", b"the real")
    with pytest.raises(ObjectCorrupt, match=re.escape("models/m2/model.cpm")):
        store.get(stored)
    with pytest.raises(ObjectCorrupt):
        list(store.chunks(stored, size=3))


def test_a_missing_object_is_an_error_naming_it(store: DataStore) -> None:
    stored = store.put("models/m3/model.cpm", b"bytes")
    store.delete("models/m3/model.cpm")
    with pytest.raises(ObjectMissing, match=re.escape("models/m3/model.cpm")):
        store.get(stored)
    store.delete("models/m3/model.cpm")  # deleting what is gone is no error


def test_the_size_check_reads_the_stores_metadata_only(store: DataStore) -> None:
    stored = store.put("models/m4/model.cpm", b"the real artifact")
    store.check_size(stored)
    # Listed first, so that an S3 filesystem has the old size cached: the check asks again.
    assert [info.size for info in store.walk("models/m4/")] == [stored.size]
    for other_size in (b"the real artifact, and more", b"the real"):
        store.put("models/m4/model.cpm", other_size)
        with pytest.raises(ObjectCorrupt, match=re.escape("models/m4/model.cpm")):
            store.check_size(stored)
    # Same size, one byte changed: not what this check sees (every read does).
    store.put("models/m4/model.cpm", b"the real artifacT")
    store.check_size(stored)
    with pytest.raises(ObjectCorrupt):
        store.get(stored)
    store.delete("models/m4/model.cpm")
    with pytest.raises(ObjectMissing, match=re.escape("models/m4/model.cpm")):
        store.check_size(stored)


def test_delete_prefix_removes_only_that_prefix(store: DataStore) -> None:
    for path in ("datasets/a/part-00000.parquet", "datasets/a/part-00001.parquet"):
        store.put(path, b"x")
    store.put("datasets/ab/part-00000.parquet", b"y")
    store.delete_prefix("datasets/a")
    assert [info.path for info in store.walk()] == ["datasets/ab/part-00000.parquet"]


def test_listing_reports_sizes_and_times(store: DataStore) -> None:
    store.put("models/m4/model.cpm", b"12345")
    (info,) = list(store.walk("models"))
    assert info.path == "models/m4/model.cpm"
    assert info.size == 5
    assert info.modified is not None
    assert abs(info.modified - datetime.now(UTC)) < timedelta(hours=1)


def test_paths_cannot_leave_the_root(tmp_path: Path) -> None:
    store = DataStore(str(tmp_path / "store"))
    for path in ("../outside", "/etc/passwd", "", "a/../../b"):
        with pytest.raises(ValueError):
            store.full_path(path)


def test_settings_default_to_a_directory_in_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, database_url=None)
    store = store_from_settings(settings)
    assert store.is_local
    assert Path(store.root) == (tmp_path / "store").resolve()
    assert "secret" not in repr(Settings(store_options={"secret": "s3cr3t"}))


def test_an_unreachable_s3_endpoint_is_unavailable_not_a_crash() -> None:
    # Nothing listens on port 9 (discard) of loopback: the connection is refused at once.
    store = DataStore(
        "s3://coppice/x",
        {
            "endpoint_url": "http://127.0.0.1:9",
            "key": "k",
            "secret": "s",
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
        },
    )
    with pytest.raises(StoreUnavailable, match="could not"):
        store.check()
    with pytest.raises(StoreUnavailable):
        store.put("models/m/model.cpm", b"x")
    sleeps: list[float] = []
    with pytest.raises(StoreUnavailable):
        wait_for_store(store, sleep=sleeps.append, max_attempts=3)
    assert sleeps == [0.5, 1.0]


def test_waiting_returns_at_once_for_a_reachable_store(store: DataStore) -> None:
    assert wait_for_store(store, sleep=lambda _: None, max_attempts=1) == 0
