"""Dataset uploads and downloads through a real server: throughput against pyarrow's own
read-and-write in one process, and the server's peak memory growth; and registering a
directory of many Parquet parts.

    python -m benchmarks.dataset_io [--mib 1024] [--csv-mib 256] [--register-parts 1000]
                                    [--csv-repeats 1]

A ``coppice serve`` (SQLite and a local store in a temporary directory, no worker) takes:

- a Parquet file of ``--mib`` MiB (ten float64 columns, random, so they barely compress, and
  one categorical column) as a raw body (``application/vnd.apache.parquet``), then downloads
  it back as Parquet; the baseline is ``pq.read_table`` + ``pq.write_table`` of the same file
  in this process;
- a CSV of ``--csv-mib`` MiB of the same table, uploaded the same way; its baseline is
  ``pyarrow.csv.read_csv`` + ``pq.write_table``; ``--csv-repeats`` times, each upload to a fresh
  server and followed by its baseline (interleaved), with the medians and their ratio;
- (``--mib 0`` leaves the Parquet file and the registering out)
- ``POST /v1/datasets`` with a source URL naming a directory of ``--register-parts`` small
  Parquet files (under ``COPPICE_IMPORT_ROOTS``), timed.

The server's memory growth is its ``VmHWM`` after the upload minus its ``VmRSS`` just before
(the high-water mark reset through ``/proc/<pid>/clear_refs`` first). Throughputs are MiB of
the file per second of wall time; the machine is shared, so the figures are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from tests.e2e.processes import serving

ROWS_PER_BATCH = 200_000


def _batch(rng: np.random.Generator, rows: int) -> pa.RecordBatch:
    columns = {f"x{j}": rng.normal(size=rows) for j in range(10)}
    columns["colour"] = rng.choice(np.array(["red", "green", "blue", "teal"]), rows)
    return pa.RecordBatch.from_pydict(columns)


def write_parquet(path: Path, mib: int) -> int:
    """A Parquet file of about ``mib`` MiB; its row count."""
    rng = np.random.default_rng(0)
    # Random doubles do not compress: about 81 bytes a row (ten of them and a dictionary code).
    target = mib * 2**20 // 81
    rows = 0
    with pq.ParquetWriter(path, _batch(rng, 1).schema) as writer:
        while rows < target:
            writer.write_batch(_batch(rng, ROWS_PER_BATCH))
            rows += ROWS_PER_BATCH
    return rows


def write_csv(path: Path, mib: int) -> int:
    rng = np.random.default_rng(1)
    rows = 0
    with pa_csv.CSVWriter(path, _batch(rng, 1).schema) as writer:
        while not path.exists() or path.stat().st_size < mib * 2**20:
            writer.write_batch(_batch(rng, ROWS_PER_BATCH // 4))
            rows += ROWS_PER_BATCH // 4
    return rows


def _memory(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _upload(url: str, pid: int, path: Path, content_type: str) -> tuple[float, int, str]:
    """(seconds, peak RSS growth in bytes, dataset id) of one raw-body upload."""

    def chunks() -> Iterator[bytes]:
        with path.open("rb") as source:
            while chunk := source.read(1 << 20):
                yield chunk

    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _memory(pid, "VmRSS")
    started = time.perf_counter()
    response = httpx.post(
        f"{url}/v1/datasets",
        params={"name": path.name},
        content=chunks(),
        headers={"content-type": content_type},
        timeout=3600,
    )
    seconds = time.perf_counter() - started
    response.raise_for_status()
    return seconds, _memory(pid, "VmHWM") - before, response.json()["id"]


def _download(url: str, dataset_id: str, target: Path, fmt: str = "parquet") -> float:
    started = time.perf_counter()
    with httpx.stream(
        "GET", f"{url}/v1/datasets/{dataset_id}/data", params={"format": fmt}, timeout=3600
    ) as response:
        response.raise_for_status()
        with target.open("wb") as sink:
            for chunk in response.iter_bytes():
                sink.write(chunk)
    return time.perf_counter() - started


def _pyarrow_parquet(path: Path, out: Path) -> float:
    started = time.perf_counter()
    pq.write_table(pq.read_table(path), out)
    return time.perf_counter() - started


def _pyarrow_csv(path: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (both of pyarrow's threads) of its read + write."""
    started, cpu = time.perf_counter(), time.process_time()
    pq.write_table(pa_csv.read_csv(path), out)
    return time.perf_counter() - started, time.process_time() - cpu


def _register(url: str, root: Path, parts: int) -> float:
    directory = root / "lake" / "many"
    directory.mkdir(parents=True)
    rng = np.random.default_rng(2)
    for index in range(parts):
        pq.write_table(
            pa.Table.from_batches([_batch(rng, 100)]), directory / f"p{index:05d}.parquet"
        )
    started = time.perf_counter()
    response = httpx.post(
        f"{url}/v1/datasets", json={"source": {"url": str(directory)}}, timeout=600
    )
    seconds = time.perf_counter() - started
    response.raise_for_status()
    assert response.json()["storage"]["n_parts"] == parts
    return seconds


def _parquet_round(
    root: Path, parquet: Path, size: float, settings: dict[str, str], register_parts: int
) -> None:
    """The Parquet upload, its download and the registering, in a server of their own."""
    with serving(root / "server-parquet", **settings) as (url, processes):
        pid = processes.started[0].pid
        seconds, growth, dataset_id = _upload(url, pid, parquet, "application/vnd.apache.parquet")
        baseline = _pyarrow_parquet(parquet, root / "baseline.parquet")
        down = _download(url, dataset_id, root / "back.parquet")
        print(
            f"Parquet upload: {size / seconds:.0f} MiB/s ({seconds:.1f} s), server peak RSS "
            f"+{growth / 2**20:.0f} MiB; pyarrow read+write {size / baseline:.0f} MiB/s "
            f"({baseline:.1f} s): {baseline / seconds:.2f}x"
        )
        print(
            f"Parquet download: {size / down:.0f} MiB/s ({down:.1f} s): "
            f"{baseline / down:.2f}x pyarrow's read+write"
        )
        if register_parts:
            seconds = _register(url, root, register_parts)
            print(f"Registering {register_parts} Parquet parts: {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--csv-mib", type=int, default=256)
    parser.add_argument("--register-parts", type=int, default=1000)
    parser.add_argument("--csv-repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coppice-dataset-io-") as tmp:
        root = Path(tmp)
        parquet, csv = root / "t.parquet", root / "t.csv"
        rows = write_parquet(parquet, args.mib) if args.mib else 0
        csv_rows = write_csv(csv, args.csv_mib)
        size = parquet.stat().st_size / 2**20 if args.mib else 0.0
        csv_size = csv.stat().st_size / 2**20
        print(f"Parquet {size:.0f} MiB ({rows} rows), CSV {csv_size:.0f} MiB ({csv_rows} rows)")
        settings = {
            "embedded_worker": "false",
            "max_upload_bytes": str(16 * 2**30),
            "import_roots": str(root / "lake"),
        }
        # Each upload in a server of its own: a server's freed memory stays in its heap and
        # would hide the next upload's growth.
        if args.mib:
            _parquet_round(root, parquet, size, settings, args.register_parts)
        _csv_rounds(root, csv, csv_size, settings, args.csv_repeats)


def _csv_rounds(root: Path, csv: Path, size: float, settings: dict[str, str], repeats: int) -> None:
    """The CSV upload ``repeats`` times, each to a fresh server and followed by pyarrow's
    baseline (interleaved); the server's CPU seconds beside the wall time, since on a loaded
    machine the wall time is mostly the share of the cores a process got. After each upload the
    table is downloaded as Parquet and as CSV (the download target is against the same
    baseline)."""
    rounds: list[dict[str, float]] = []
    for repeat in range(repeats):
        with serving(root / f"server-csv-{repeat}", **settings) as (url, processes):
            pid = processes.started[0].pid
            cpu = _cpu_seconds(pid)
            seconds, growth, dataset_id = _upload(url, pid, csv, "text/csv")
            cpu = _cpu_seconds(pid) - cpu
            down_parquet = _download(url, dataset_id, root / "back.parquet")
            csv_cpu = _cpu_seconds(pid)
            down_csv = _download(url, dataset_id, root / "back.csv", "csv")
            csv_cpu = _cpu_seconds(pid) - csv_cpu
        baseline, baseline_cpu = _pyarrow_csv(csv, root / "baseline-csv.parquet")
        rounds.append(
            {
                "upload": seconds,
                "cpu": cpu,
                "pyarrow": baseline,
                "pyarrow_cpu": baseline_cpu,
                "ratio": baseline / seconds,
                "parquet_down": baseline / down_parquet,
                "csv_down": baseline / down_csv,
            }
        )
        print(
            f"CSV upload: {size / seconds:.1f} MiB/s ({seconds:.1f} s, server CPU {cpu:.1f} s), "
            f"server peak RSS +{growth / 2**20:.0f} MiB ({growth / 2**20 / size:.2f}x the file); "
            f"pyarrow.csv read + Parquet write {size / baseline:.0f} MiB/s ({baseline:.1f} s, "
            f"CPU {baseline_cpu:.1f} s): {baseline / seconds:.2f}x; downloads: Parquet "
            f"{down_parquet:.1f} s ({baseline / down_parquet:.2f}x), CSV {down_csv:.1f} s "
            f"(server CPU {csv_cpu:.1f} s; {baseline / down_csv:.2f}x); load {os.getloadavg()}",
            flush=True,
        )
    if repeats > 1:
        medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        print(
            f"CSV medians of {repeats}: upload {medians['upload']:.1f} s (server CPU "
            f"{medians['cpu']:.1f} s), pyarrow {medians['pyarrow']:.1f} s (CPU "
            f"{medians['pyarrow_cpu']:.1f} s): {medians['pyarrow'] / medians['upload']:.2f}x "
            f"(median of the rounds' ratios {medians['ratio']:.2f}x); downloads' ratios: "
            f"Parquet {medians['parquet_down']:.2f}x, CSV {medians['csv_down']:.2f}x"
        )


if __name__ == "__main__":
    main()
