"""What the Dask executor and the Dask histogram partitions share: the client's health, how
often a lost cluster is retried, and the once-per-worker setup.

Both :mod:`engine.parallel._dask` (tasks) and :mod:`engine.parallel._dask_histograms`
(boosting's row partitions) import these from here, so neither imports the other's module
for them.
"""

from __future__ import annotations

import os

from distributed import Client

from engine.process_setup import WORKER_ENVIRONMENT, keep_freed_memory, limit_blas_threads

__all__ = [
    "MAX_RESCATTERS",
    "ClusterLostError",
    "check_connected",
    "prepare_worker",
    "scheduler_address",
]

# Times the executor re-sends lost shared arrays within one map before giving up: each
# resend follows the loss of every worker holding a copy, which a healthy cluster survives
# once or twice, not without end. The histogram partitions move as often at most.
MAX_RESCATTERS = 3


class ClusterLostError(RuntimeError):
    """The Dask scheduler went away mid-fit; the fit cannot go on (retry it later)."""


def scheduler_address(client: Client) -> str:
    """The address of the client's scheduler, for error messages and status reports."""
    return str(getattr(client.scheduler, "address", None) or "unknown scheduler")


def check_connected(client: Client) -> None:
    """Raise :class:`ClusterLostError` unless the client still talks to its scheduler."""
    if client.status != "running":
        raise ClusterLostError(
            f"Lost the Dask scheduler at {scheduler_address(client)} (client {client.status})."
        )


_worker_ready = False


def prepare_worker() -> None:
    """Once per Dask worker process: what the local worker processes set for themselves.

    One BLAS thread per task, and glibc told to keep freed memory: growing a tree allocates
    and drops arrays of megabytes per node, and a cold allocator faults fresh pages in for
    each (see :func:`engine.process_setup.keep_freed_memory`).
    """
    global _worker_ready
    if not _worker_ready:
        os.environ.update(WORKER_ENVIRONMENT)
        limit_blas_threads()
        keep_freed_memory()
        _worker_ready = True
