"""The executor interface every backend honours, and the serial executor whose results (and
their order) every other executor reproduces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Any, Protocol, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

SharedData = Mapping[str, NDArray[Any]]
"""What a task function receives first: read-only arrays by name, shared by all tasks."""

T = TypeVar("T")
R = TypeVar("R")


class WorkerCrashedError(RuntimeError):
    """A worker process died while running a task (killed, out of memory, a native crash)."""


class Executor(Protocol):
    """Runs ``fn(shared, task)`` for every task and yields the results in task order.

    Implementations are context managers; leaving the block (normally or by an exception)
    calls :meth:`shutdown`, which stops all outstanding work promptly.
    """

    def map(self, fn: Callable[[SharedData, T], R], tasks: Sequence[T]) -> Iterator[R]:
        """Yield ``fn(shared, task)`` for each task, in task order, as results become ready.

        ``fn`` must be a module-level function (workers import it by name). A map that is not
        consumed to its end shuts the executor down.
        """
        ...

    def shutdown(self) -> None:
        """Stop all work and release every resource; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ShutsDownOnExit:
    """``with`` support for anything with a ``shutdown()``: leaving the block calls it."""

    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


def _read_only(shared: Mapping[str, NDArray[Any]]) -> SharedData:
    views = {}
    for name, array in shared.items():
        view = np.asarray(array).view()
        view.flags.writeable = False
        views[name] = view
    return MappingProxyType(views)


class SerialExecutor(ShutsDownOnExit):
    """Runs every task in the calling process, lazily, on read-only views of the arrays.

    Parameters
    ----------
    shared : mapping of str to ndarray
        Arrays passed to every task; not copied.
    """

    def __init__(self, shared: Mapping[str, NDArray[Any]]) -> None:
        self._shared = _read_only(shared)
        self._closed = False

    def map(self, fn: Callable[[SharedData, T], R], tasks: Sequence[T]) -> Iterator[R]:
        if self._closed:
            raise RuntimeError("This executor has been shut down.")
        return self._run(fn, list(tasks))

    def _run(self, fn: Callable[[SharedData, T], R], tasks: list[T]) -> Iterator[R]:
        finished = False
        try:
            for task in tasks:
                if self._closed:
                    return
                yield fn(self._shared, task)
            finished = True
        finally:
            # Same contract as the process executor: an unfinished map ends the executor.
            if not finished:
                self.shutdown()

    def shutdown(self) -> None:
        self._closed = True
