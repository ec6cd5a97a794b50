"""The worker's check of a new artifact before naming it: a full read against its SHA-256, as
before, and ``verify_artifact`` now (its size from the store's metadata, for artifacts over
``FULL_CHECK_BYTES``).

    python -m benchmarks.artifact_verify [--gib 2] [--repeats 3]

A synthetic artifact of ``--gib`` GiB (16 MiB pieces, each different) is written through
``write_artifact`` into a local store in a temporary directory, then each check is timed
``--repeats`` times, interleaved; the medians are printed with the load average. The local
store's bytes are in the page cache after writing, so the full read measures hashing and
copying, the least it costs; from S3 or a cold disk it is slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator

from service.models.artifacts import READ_PIECE_BYTES, verify_artifact, write_artifact
from service.store import DataStore

PIECE = 16 * 2**20


def _pieces(count: int) -> Iterator[bytes]:
    block = os.urandom(PIECE)
    for index in range(count):
        yield index.to_bytes(8, "little") + block[8:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coppice-artifact-verify-") as tmp:
        store = DataStore(tmp)
        stored = write_artifact(store, "big", _pieces(int(args.gib * 2**30 // PIECE)))
        full, check = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            for _ in store.chunks(stored, READ_PIECE_BYTES):
                pass
            full.append(time.perf_counter() - started)
            started = time.perf_counter()
            verify_artifact(store, stored)
            check.append(time.perf_counter() - started)
        print(
            f"{stored.size / 2**30:.2f} GiB artifact: full read + SHA-256 "
            f"{statistics.median(full):.2f} s, verify_artifact {statistics.median(check) * 1e3:.2f}"
            f" ms (medians of {args.repeats}); load {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
