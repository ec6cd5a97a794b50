"""``Client.upload`` against a real server: every kind of table, and a 50 MB CSV file and a
22 MiB DataFrame (sent as Parquet) streamed with the client's peak memory far under their size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coppice import Client, PayloadTooLargeError
from tests.client.helpers import MAX_UPLOAD_BYTES, churn_frame, write_csv
from tests.e2e.test_upload_memory import _csv_of_size


def _kinds(dataset_columns: list[dict[str, object]]) -> dict[str, object]:
    return {str(c["name"]): c["kind"] for c in dataset_columns}


def test_upload_a_csv_file_with_forced_categories(client: Client, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "churn.csv", churn_frame(50))

    dataset = client.upload(path, categorical=["age"])

    assert dataset.name == "churn.csv"
    assert (dataset.n_rows, dataset.n_columns) == (50, 4)
    assert _kinds(dataset.columns) == {
        "age": "categorical",
        "plan": "categorical",
        "monthly": "numeric",
        "churned": "categorical",
    }


def test_upload_a_dataframe_keeps_kinds_and_missing_values(client: Client) -> None:
    frame = churn_frame(30)
    frame["code"] = ["007", "7", "0.50"] * 10  # text that looks like numbers stays text

    dataset = client.upload(frame, name="frame")

    columns = {c["name"]: c for c in dataset.columns}
    assert dataset.n_rows == 30
    assert columns["code"]["kind"] == "categorical" and columns["code"]["n_unique"] == 3
    assert columns["monthly"]["n_missing"] == frame["monthly"].isna().sum()
    assert columns["age"]["kind"] == "numeric"


def test_upload_an_array_with_column_names(client: Client) -> None:
    array = np.array([[1.5, np.nan], [2.0, 3.0], [0.1 + 0.2, 1e-300]])

    dataset = client.upload(array, columns=["a", "b"], name="array")

    assert _kinds(dataset.columns) == {"a": "numeric", "b": "numeric"}
    assert {c["name"]: c["n_missing"] for c in dataset.columns} == {"a": 0, "b": 1}
    with pytest.raises(ValueError, match="columns"):
        client.upload(array)


def test_upload_records(client: Client) -> None:
    records = [{"x": 1.0, "colour": "red"}, {"x": float("nan"), "colour": None}, {"x": 2}]

    dataset = client.upload(records, name="records")

    assert dataset.n_rows == 3
    assert {c["name"]: c["n_missing"] for c in dataset.columns} == {"x": 1, "colour": 2}


SIZE = 50 * 1024 * 1024
# The issue asks for less than 2x the file; streaming in 1 MiB chunks should hold far less,
# so the bound is set where holding even one whole copy of the file would fail.
MAX_GROWTH = 0.25

# Runs in a process of its own, so that its resident-set high-water mark (VmHWM, reset just
# before the upload through /proc/self/clear_refs) is the upload's and nothing else's.
UPLOADER = """
import sys
from pathlib import Path
from coppice import Client, PayloadTooLargeError

def memory(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

client = Client(sys.argv[1])
client.datasets(limit=1)  # imports and the connection are not the upload's cost
Path("/proc/self/clear_refs").write_text("5")
before = memory("VmRSS")
dataset = client.upload(sys.argv[2])
print(memory("VmHWM") - before, dataset.n_rows, dataset.info["size_bytes"])
"""


@pytest.mark.slow
def test_a_50_mb_csv_is_streamed_with_little_client_memory(server_url: str, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(_csv_of_size(SIZE))

    result = subprocess.run(
        [sys.executable, "-c", UPLOADER, server_url, str(path)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    growth, n_rows, size = (int(value) for value in result.stdout.split())
    # The figure docs/client.md quotes (shown with pytest -s).
    print(f"{SIZE / 2**20:.0f} MiB CSV uploaded: client peak RSS +{growth / 2**20:.1f} MiB")
    assert size == SIZE and n_rows > 500_000
    assert growth < MAX_GROWTH * SIZE, (
        f"uploading {SIZE / 2**20:.0f} MiB raised the client's peak RSS by "
        f"{growth / 2**20:.1f} MiB ({growth / SIZE:.2f}x the file)"
    )


# A DataFrame is written as CSV a slice of rows at a time while it is sent. The first upload
# of a process pays for imports and first-use buffers (about 16 MiB, whatever the table's
# size), so a small upload goes first; after it, what a 46 MiB table's upload adds is a few
# slices in flight, about 10 MiB however long the table (9.0 MiB for 16 MB of CSV, 9.9 MiB for
# 49 MB, when this test was written). Holding the CSV text whole would add its size.
FRAME_UPLOADER = """
import sys
from pathlib import Path
import numpy as np
import pandas as pd
from coppice import Client

def memory(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

rng = np.random.default_rng(0)
n = int(sys.argv[2])
frame = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(8)})
frame["colour"] = rng.choice(["red", "green", "blue"], n)
client = Client(sys.argv[1])
client.upload(frame.iloc[:20_000], name="warm-up")
Path("/proc/self/clear_refs").write_text("5")
before = memory("VmRSS")
dataset = client.upload(frame, name="frame")
print(
    memory("VmHWM") - before,
    dataset.n_rows,
    dataset.info["size_bytes"],
    int(frame.memory_usage(deep=True).sum()),
)
"""


@pytest.mark.slow
def test_a_large_dataframe_is_streamed_without_a_copy_of_itself(server_url: str) -> None:
    # With pyarrow installed the frame goes as Parquet, a row group at a time.
    result = subprocess.run(
        [sys.executable, "-c", FRAME_UPLOADER, server_url, "300000"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    growth, n_rows, size, frame_bytes = (int(value) for value in result.stdout.split())
    print(
        f"{frame_bytes / 2**20:.0f} MiB DataFrame uploaded as {size / 2**20:.0f} MiB of "
        f"Parquet: client peak RSS +{growth / 2**20:.1f} MiB"
    )
    assert n_rows == 300_000 and frame_bytes > 20 * 2**20
    assert growth < 0.5 * frame_bytes, (
        f"+{growth / 2**20:.1f} MiB for {frame_bytes / 2**20:.0f} MiB"
    )


def test_an_oversized_file_is_refused_with_the_servers_detail(
    client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "huge.csv"
    with path.open("wb") as file:  # sparse: refused by its Content-Length before it is read
        file.truncate(MAX_UPLOAD_BYTES + 2 * 1024 * 1024)

    with pytest.raises(PayloadTooLargeError, match="COPPICE_MAX_UPLOAD_BYTES"):
        client.upload(path)
