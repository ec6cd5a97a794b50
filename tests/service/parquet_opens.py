"""Who opens a Parquet file: ``log_opens`` makes every ``pq.ParquetFile`` of a process write
that process's pid to a file, so a test can tell which processes read a dataset's parts.

Dask workers do not import the tests, so a test that runs ``log_opens`` on them registers
this module with ``cloudpickle.register_pickle_by_value`` (``register_by_value``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow.parquet as pq


def register_by_value() -> None:
    """Send this module's functions to Dask workers by value."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def log_opens(log: str | None) -> None:
    """In this process: log the pid of every ``pq.ParquetFile`` made (``log`` None: stop)."""
    original = getattr(pq, "_unlogged_parquet_file", pq.ParquetFile)
    if log is None:
        pq.ParquetFile = original  # type: ignore[misc]
        return
    pq._unlogged_parquet_file = original  # type: ignore[attr-defined]

    def logged(*args: Any, **kwargs: Any) -> Any:
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return original(*args, **kwargs)

    pq.ParquetFile = logged  # type: ignore[misc]
