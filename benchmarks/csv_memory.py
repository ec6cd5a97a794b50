"""Memory of ingesting a CSV column of unique strings, against the column's bytes.

    python -m benchmarks.csv_memory [--rows N] [--length L] [--tracemalloc]

Writes a one-column CSV of N unique ids of L characters to a temporary file, streams it in
64 KiB chunks through the upload path (``parse_csv``, ``finish``, ``summarize``,
``encode_column``) in a fresh process, and prints the peak memory over each stage divided by
the file's size: the growth of the process's resident high-water mark (``VmHWM``, Linux), or
with ``--tracemalloc`` the peak of memory traced by Python (slower, but the same from run to
run: RSS also counts a moment's copy when an array grows, which depends on the heap).
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path


def _high_water() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM is not in /proc/self/status (not Linux?)")


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while chunk := file.read(65536):
            yield chunk


def measure(path: Path, traced: bool) -> None:
    from service.datasets.columns import encode_column, summarize
    from service.datasets.ingest import parse_csv

    size = path.stat().st_size
    gc.collect()
    if traced:
        tracemalloc.start()
    base = 0 if traced else _high_water()

    def peak() -> float:
        used = tracemalloc.get_traced_memory()[1] if traced else _high_water() - base
        return used / size

    started = time.perf_counter()
    table, counted = parse_csv(_chunks(path), max_columns=1)
    parsing = peak()
    parsed = table.finish([], size_bytes=counted.size, sha256=counted.sha256)
    del table
    finishing = peak()
    for column in parsed.columns:
        summarize(column)
        encode_column(column)
    print(
        f"{size / 2**20:.1f} MiB: peak {'traced' if traced else 'RSS growth'} while parsing "
        f"{parsing:.2f}x, through finish {finishing:.2f}x, through summary and encoding "
        f"{peak():.2f}x ({time.perf_counter() - started:.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)  # the measuring child
    args = parser.parse_args()
    if args.file is not None:
        measure(args.file, args.tracemalloc)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "unique.csv"
        digits = args.length - 3
        with path.open("w") as file:
            file.write("key\n")
            for i in range(args.rows):
                file.write(f"id-{i * 0x9E3779B97F4A7C15 % 16**digits:0{digits}x}\n")
        print(f"{args.rows:,} unique ids of {args.length} characters, ", end="", flush=True)
        # A fresh process, so the high-water mark starts with nothing but the imports.
        command = [sys.executable, "-m", "benchmarks.csv_memory", "--file", str(path)]
        subprocess.run(command + (["--tracemalloc"] if args.tracemalloc else []), check=True)


if __name__ == "__main__":
    main()
