"""A worker process's entry point, and the replies it sends back: a task's result, or the
error the task raised with its formatted traceback.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from engine.parallel._executor import SharedData
from engine.parallel._shared import _map_read_only, _SegmentSpec
from engine.process_setup import WORKER_ENVIRONMENT, keep_freed_memory, limit_blas_threads


class _RemoteTraceback(Exception):
    """Carries a worker's formatted traceback as the ``__cause__`` of the re-raised error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


def _pack_error(exc: BaseException) -> tuple[BaseException | None, str, str]:
    text = "".join(traceback.format_exception(exc))
    summary = f"{type(exc).__name__}: {exc}"
    try:
        # Exceptions with unusual constructors pickle but fail to unpickle; test both ways.
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return None, summary, text
    return exc, summary, text


class _Reply(NamedTuple):
    """A worker's answer: a task's result, or the error it raised (see :func:`_pack_error`)."""

    task: int
    ok: bool
    payload: Any


def _unwrap(reply: _Reply) -> Any:
    if reply.ok:
        return reply.payload
    exc, summary, text = reply.payload
    error = exc if exc is not None else RuntimeError(summary)
    raise error from _RemoteTraceback(f'\n"""\n{text}"""')


def _worker_main(
    conn: Connection, specs: list[_SegmentSpec], inherited: Sequence[Connection] = ()
) -> None:
    """A worker's whole life: attach the arrays, then run tasks until told or orphaned.

    ``inherited``: the parent's pipe ends a forked worker holds copies of, closed at once so
    that the parent's death, however sudden, reads as EOF here.
    """
    for parent_end in inherited:
        parent_end.close()
    # Ctrl-C reaches the whole process group; the parent decides what stops, and how.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(WORKER_ENVIRONMENT)
    limit_blas_threads()
    keep_freed_memory()
    mappings: list[Any] = []  # keeps every mapping alive as long as the views on it
    try:
        views = {}
        for spec in specs:
            buffer = _map_read_only(spec, mappings)
            view: NDArray[Any] = np.ndarray(spec.shape, spec.dtype, buffer=buffer)
            view.flags.writeable = False
            views[spec.name] = view
        shared: SharedData = MappingProxyType(views)
    except BaseException as exc:
        conn.send((-1, False, _pack_error(exc)))
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        except BaseException as exc:  # the task or its function could not be unpickled here
            conn.send((-1, False, _pack_error(exc)))
            continue
        index, fn, task = message
        try:
            reply = (index, True, fn(shared, task))
        except BaseException as exc:
            reply = (index, False, _pack_error(exc))
        try:
            conn.send(reply)
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as exc:  # the result cannot be pickled
            conn.send((index, False, _pack_error(exc)))
