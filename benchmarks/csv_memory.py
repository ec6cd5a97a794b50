"""Memory of ingesting a CSV column of unique strings, against the column's bytes.

    python -m benchmarks.csv_memory [--rows N] [--length L] [--distinct K] [--tracemalloc] [--cold]

Writes a one-column CSV of N unique ids of L characters (``id-`` and hex digits, in
pseudo-random order; with ``--distinct``, each row one of K such ids drawn at random, seeded)
to a temporary file, streams it in 64 KiB chunks through the upload path in a fresh process
(``parse_csv``; ``finish``; ``take_encoded``, which summarises and encodes each column as
``create_dataset`` does) and prints, for each stage, the peak memory since the start divided
by the file's size, and the stage's time. Memory is the growth of the process's resident
high-water mark (``VmHWM``, Linux, reset to the RSS at the start), or with ``--tracemalloc``
the peak of memory traced by Python (slower, blind to memory maps, the same from run to run).

First a file of the same shape and 20,000 rows goes through the same path, so what a first
upload costs once whatever its size (lazy imports, NumPy's first calls, the allocator's
arenas: about 2.5 MiB) is not counted against the file; the service's memory test warms up
the same way. ``--cold`` skips that.
"""

from __future__ import annotations

import argparse
import gc
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

from benchmarks.process_memory import reset_high_water, status_bytes

WARM_UP_ROWS = 20_000
# Odd, so that multiplying by it permutes the residues modulo any power of two: unique ids.
_MIXER = 0x9E3779B97F4A7C15F39CC0605CEDC835


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while chunk := file.read(65536):
            yield chunk


def write_ids(path: Path, rows: int, length: int, distinct: int | None = None) -> None:
    """A CSV with the header ``key`` and ``rows`` ids of ``length`` characters: unique, or
    each one of ``distinct`` ids drawn at random (the same ones from run to run)."""
    digits = length - 3
    distinct = distinct or rows
    if 16**digits < distinct:
        raise SystemExit(f"{distinct:,} distinct ids need more than {length} characters")
    modulus = 16**digits
    with path.open("w") as file:
        file.write("key\n")
        draw = random.Random(0).randrange
        for i in range(rows):
            number = i if distinct == rows else draw(distinct)
            file.write(f"id-{number * _MIXER % modulus:0{digits}x}\n")


def _upload(path: Path) -> Iterator[str]:
    """The upload path on ``path``, yielding each stage's name once it is done."""
    from service.datasets.columns import take_encoded
    from service.datasets.ingest import parse_csv

    table, counted = parse_csv(_chunks(path), max_columns=1)
    yield "parse"
    parsed = table.finish([], size_bytes=counted.size, sha256=counted.sha256)
    del table
    yield "finish"
    for _ in take_encoded(parsed.columns):
        pass
    yield "summary and encoding"


def measure(path: Path, traced: bool, warm_up: Path | None) -> None:
    import service.datasets.columns
    import service.datasets.ingest  # noqa: F401  (imported before the start, as in a server)

    if warm_up is not None:
        for _ in _upload(warm_up):
            pass
    size = path.stat().st_size
    gc.collect()
    if traced:
        tracemalloc.start()
    else:
        reset_high_water()  # the warm-up's peak is not this upload's
    base = 0 if traced else status_bytes("VmHWM")
    parts = []
    started = time.perf_counter()
    for stage in _upload(path):
        used = tracemalloc.get_traced_memory()[1] if traced else status_bytes("VmHWM") - base
        now = time.perf_counter()
        parts.append(f"{stage} {used / size:.2f}x ({now - started:.2f} s)")
        started = now
    what = "traced" if traced else "RSS growth"
    print(f"{size / 2**20:.1f} MiB: peak {what} through " + ", ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--distinct", type=int, help="this many distinct ids (default: all)")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--cold", action="store_true", help="no warm-up upload first")
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)  # the measuring child
    parser.add_argument("--warm-up", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.file is not None:
        measure(args.file, args.tracemalloc, args.warm_up)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "unique.csv"
        write_ids(path, args.rows, args.length, args.distinct)
        # A fresh process, so the high-water mark starts with nothing but the imports.
        command = [sys.executable, "-m", "benchmarks.csv_memory", "--file", str(path)]
        if not args.cold:
            warm_up = Path(folder) / "warm-up.csv"
            write_ids(warm_up, WARM_UP_ROWS, args.length, args.distinct)
            command += ["--warm-up", str(warm_up)]
        warmth = "cold" if args.cold else "after a warm-up"
        kind = f"{args.distinct:,} distinct" if args.distinct else "unique"
        print(f"{args.rows:,} {kind} ids of {args.length} characters, {warmth}: ", end="")
        sys.stdout.flush()
        subprocess.run(command + (["--tracemalloc"] if args.tracemalloc else []), check=True)


if __name__ == "__main__":
    main()
