"""Where a fit's parallel part runs: on this machine, or on the Dask cluster of
``COPPICE_DASK_SCHEDULER``.

The fit process is the Dask client: it connects when its job starts, runs the fit inside
:func:`engine.parallel_backend`, and disconnects when the fit ends, so a fit process that dies
takes its client (and, by Dask's reference counting, its scattered data and tasks) with it.

Failure modes, and who handles them:

- the scheduler cannot be reached when the job starts: a :class:`TrainingError` naming the
  address (the job fails with ``dask_unreachable``; nothing was computed);
- a Dask worker dies mid-fit: Dask reschedules its tasks and the engine re-sends any data
  that went with it (:mod:`engine.parallel._dask`); the job carries on;
- the scheduler dies mid-fit: the engine raises, the attempt ends as an unexpected error, and
  the queue retries the job after its back-off (``COPPICE_MAX_ATTEMPTS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import engine
from service.training.spec import TrainingError

__all__ = ["DASK_STAGE_PREFIX", "dask_client", "fit_cluster", "stage_on"]

# Every stage a fit on the cluster reports starts with this, then the scheduler's address;
# /metrics counts the running jobs whose stage does (coppice_jobs_running_by_backend).
DASK_STAGE_PREFIX = "[dask "


def stage_on(address: str | None, stage: str) -> str:
    """``stage`` as the job shows it: prefixed with where the fit runs when on a cluster."""
    return stage if address is None else f"{DASK_STAGE_PREFIX}{address}] {stage}"


@contextmanager
def fit_cluster(address: str | None, connect_timeout: float = 10.0) -> Iterator[int | None]:
    """Run the body's fits on the Dask scheduler at ``address`` (None: locally); yields the
    number of the cluster's workers when the fit begins (None: locally).

    Raises ``TrainingError`` as :func:`dask_client` does.
    """
    if address is None:
        yield None
        return
    with dask_client(address, connect_timeout) as client, engine.parallel_backend(client):
        yield len(client.scheduler_info().get("workers", {}))


@contextmanager
def dask_client(address: str, connect_timeout: float = 10.0) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``address``, this body's alone.

    Raises
    ------
    TrainingError
        ``dask_unavailable`` when ``distributed`` is not installed, ``dask_unreachable`` when
        no scheduler answers at ``address`` within ``connect_timeout`` seconds.
    """
    try:
        from distributed import Client
    except ImportError:
        raise TrainingError(
            "dask_unavailable",
            f"COPPICE_DASK_SCHEDULER is {address}, but this worker lacks Dask's distributed "
            "package; install coppice[dask] or unset the setting.",
        ) from None
    try:
        # set_as_default=False: the client is this body's alone, never a process-wide default.
        client = Client(address, timeout=connect_timeout, set_as_default=False)
    except (OSError, TimeoutError) as error:
        raise TrainingError(
            "dask_unreachable",
            f"Could not reach the Dask scheduler at {address} "
            f"(COPPICE_DASK_SCHEDULER) within {connect_timeout:g} s: {error}",
        ) from None
    try:
        yield client
    finally:
        # After a lost scheduler closing can fail too; that must not hide why the body ended.
        with contextlib.suppress(Exception):
            client.close(timeout=connect_timeout)
