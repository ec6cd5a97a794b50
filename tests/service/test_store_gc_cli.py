"""``coppice store gc``: what it sweeps, how it says so, and its arguments."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from service import cli
from service.cli import main
from service.datasets.formats import spool
from service.store.gc import DEFAULT_GRACE


def test_the_default_grace_is_the_sweep_s() -> None:
    # service.cli keeps its own copy so `coppice --help` does not import the database stack.
    assert cli.DEFAULT_GRACE == DEFAULT_GRACE


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800)]
)
def test_durations(text: str, seconds: float) -> None:
    assert cli._duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["soon", "-1", "5w", ""])
def test_a_bad_duration_is_a_usage_error(
    coppice_env: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["store", "gc", "--older-than", text])
    assert exited.value.code == 2
    assert "--older-than" in capsys.readouterr().err


def test_gc_sweeps_only_old_objects_no_row_names(
    coppice_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    store = coppice_env / "store"
    old, new = store / "models" / "gone" / "model.cpm", store / "datasets" / "d" / "part.parquet"
    for path in (old, new):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"orphan")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    capsys.readouterr()

    assert main(["store", "gc", "--older-than", "1h", "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "would delete models/gone/model.cpm" in dry and old.exists()
    assert "would delete 1 object(s), 6 bytes; kept 0 named and 1 unnamed" in dry

    assert main(["store", "gc", "--older-than", "1h"]) == 0
    assert "deleted models/gone/model.cpm" in capsys.readouterr().out
    assert not old.exists() and new.exists()


def test_gc_in_a_process_of_its_own_keeps_what_rows_name(coppice_env: Path) -> None:
    """`coppice store gc` as its own process: nothing there imports the tables but the sweep
    itself, and without them every object would look unnamed (and be deleted)."""
    assert main(["migrate"]) == 0
    store = coppice_env / "store"
    named = store / "datasets" / "d" / "part-00000.parquet"
    named.parent.mkdir(parents=True)
    named.write_bytes(b"named")
    database = sqlite3.connect(coppice_env / "coppice.db")
    with database:
        database.execute(
            "INSERT INTO datasets (id, name, n_rows, n_columns, size_bytes, sha256, created_at) "
            "VALUES ('d', 'd', 1, 1, 5, '', '2026-01-01 00:00:00.000000')"
        )
        database.execute(
            "INSERT INTO dataset_parts (dataset_id, part, row_offset, n_rows, path, size) "
            "VALUES ('d', 0, 0, 1, 'datasets/d/part-00000.parquet', 5)"
        )
    database.close()

    swept = subprocess.run(
        [sys.executable, "-m", "service", "store", "gc", "--older-than", "0"],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    ).stdout

    assert "deleted 0 object(s), 0 bytes; kept 1 named" in swept
    assert named.exists()


def test_gc_sweeps_uploads_a_killed_server_left_spooled(
    coppice_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spooled upload outlives its request only if its process died mid-upload; the sweep
    deletes those past the grace and leaves younger ones (another replica's upload in flight)
    and anything else in the directory alone."""
    assert main(["migrate"]) == 0
    uploads = coppice_env / "uploads"
    abandoned = spool([b"a,b\n", b"1,2\n"], uploads).path
    in_flight = spool([b"x\n"], uploads).path
    other = uploads / "notes.txt"
    other.write_text("not a spool")
    two_hours_ago = time.time() - 7200
    for path in (abandoned, other):
        os.utime(path, (two_hours_ago, two_hours_ago))
    capsys.readouterr()

    assert main(["store", "gc", "--older-than", "1h", "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"would delete {abandoned}" in dry and abandoned.exists()
    assert "would delete 1 spooled upload(s), 8 bytes" in dry

    assert main(["store", "gc", "--older-than", "1h"]) == 0
    assert f"deleted {abandoned}" in capsys.readouterr().out
    assert not abandoned.exists() and in_flight.exists() and other.exists()


def test_gc_without_an_uploads_directory_says_none(
    coppice_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    capsys.readouterr()
    assert main(["store", "gc"]) == 0
    assert "deleted 0 spooled upload(s), 0 bytes" in capsys.readouterr().out
