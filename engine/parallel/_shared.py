"""Arrays in shared memory: the parent copies each into its own segment once, and a worker
maps the segments read-only, so the arrays are never pickled per task.
"""

from __future__ import annotations

import errno
import mmap
import os
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class _SegmentSpec:
    """How a worker finds one shared array: small, so it is cheap to send to every worker."""

    name: str
    segment: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def nbytes(self) -> int:
        return max(1, int(np.prod(self.shape)) * self.dtype.itemsize)  # segments are never empty


def _shareable(name: str, array: Any) -> NDArray[Any]:
    # Checked for every array before any segment exists, so a bad one leaks nothing.
    contiguous: NDArray[Any] = np.ascontiguousarray(array)
    if contiguous.dtype.hasobject:
        raise TypeError(
            f"Shared array {name!r} has dtype {contiguous.dtype}; objects cannot be shared."
        )
    return contiguous


def _reserve(segment: shared_memory.SharedMemory, name: str, nbytes: int) -> None:
    """Allocate the segment's pages now, so a full /dev/shm is an error rather than a crash.

    ``ftruncate`` only sets a size; writing to pages tmpfs then cannot back raises SIGBUS and
    kills the process. Docker's default /dev/shm is 64 MB, smaller than a large training set.
    """
    fd = getattr(segment, "_fd", -1)  # private, but stable since 3.8; absent on Windows
    if nbytes == 0 or fd < 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise OSError(
                errno.ENOSPC,
                f"Not enough shared memory for array {name!r} ({nbytes} bytes). Use n_jobs=1, "
                "or give the machine or container more /dev/shm (e.g. docker --shm-size).",
            ) from None
        # Other errors (EINVAL, EOPNOTSUPP): the filesystem cannot preallocate; carry on.


def _map_read_only(spec: _SegmentSpec, mappings: list[Any]) -> Any:
    """Map one segment so the OS, not just a NumPy flag, refuses writes from a task."""
    path = os.path.join("/dev/shm", spec.segment)
    if os.path.isdir("/dev/shm"):  # Linux, where POSIX shared memory objects are files here
        fd = os.open(path, os.O_RDONLY)
        try:
            mapping = mmap.mmap(fd, spec.nbytes, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        mappings.append(mapping)
        return mapping
    # Elsewhere the segment can only be opened for writing; the NumPy flag is the guard.
    segment = shared_memory.SharedMemory(name=spec.segment)
    mappings.append(segment)
    buffer = segment.buf
    assert buffer is not None  # None only after close()
    return buffer.toreadonly()
