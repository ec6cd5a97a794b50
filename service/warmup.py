"""Compile (or load) every kernel a Coppice process runs, before it serves or fits.

The engine's kernels (``engine.warmup``) and the service's own: the reader that takes a predict
body's ``rows`` straight into a float matrix (``service.models.json_rows``). Numba compiles a
kernel at its first call, so without this a fresh server's first ``rows`` predict would pay
its compilation (seconds; tens of seconds on a loaded machine).

``python -m service.warmup`` is what ``make kernels`` and the image build run.
"""

from __future__ import annotations

import time

from engine.warmup import warm_kernels

__all__ = ["warm_service_kernels"]


def warm_service_kernels() -> float:
    """Compile or load the service's kernels (the engine's included); the seconds it took."""
    start = time.perf_counter()
    warm_kernels()
    from service.models.json_rows import parse_rows

    # Bytes as the router hands them over (a read-only buffer: its own Numba signature), with
    # each kind of number the reader converts: integers, fractions, exponents, nulls.
    body = b'{"rows": [[1, -2.5, 3e-7, null], [0.1, 12345678901234567, -0.0, 1E300]]}'
    parse_rows(body, body.index(b"[["), 10)
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"kernels ready in {warm_service_kernels():.1f} s")
