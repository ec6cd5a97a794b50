"""Threads a tree ensemble's ``predict`` uses, set by the caller for a block of code.

A model's ``n_jobs`` is what its fit was given (worker processes on the training machine);
a server answering requests knows better how many threads a large batch may take there. The
leaf-value sums share a batch's rows among threads with the same result to the last bit
(:meth:`engine.tree.predict.packing.PackedTrees.leaf_value_sum`), so the count changes the
time of a prediction, never its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_THREADS: ContextVar[int | None] = ContextVar("engine_prediction_threads", default=None)


@contextmanager
def prediction_threads(n_threads: int) -> Iterator[None]:
    """Tree ensembles predicting in this block (this thread, this task) use up to
    ``n_threads`` threads, whatever their ``n_jobs``; batches too small to share are still
    predicted on the calling thread alone."""
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1; got {n_threads}.")
    token = _THREADS.set(n_threads)
    try:
        yield
    finally:
        _THREADS.reset(token)


def set_prediction_threads() -> int | None:
    """The count :func:`prediction_threads` set here, or None outside it."""
    return _THREADS.get()
