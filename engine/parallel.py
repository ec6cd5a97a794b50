"""One executor interface for ``n_jobs``: run independent tasks serially or in worker processes.

An estimator hands :func:`make_executor` the large read-only arrays every task needs (the binned
training matrix, targets, weights) and then maps a module-level task function over small task
descriptions (seeds, indices)::

    with make_executor({"X_binned": X_binned, "y": y}, n_jobs, len(seeds)) as executor:
        for done, tree in enumerate(executor.map(_fit_one_tree, seeds), start=1):
            trees.append(tree)
            notify(callbacks, ProgressEvent(name, done, len(seeds)))  # may raise

Results arrive in task order as soon as they (and all earlier ones) are ready, so the caller can
report progress and stop early. Leaving the ``with`` block, or abandoning a ``map`` before its end
(the consumer stops, a task raises, a worker dies), terminates the workers at once and frees the
shared memory. The serial and the process executor compute the same results in the same order;
any other backend (a distributed one, say) only has to honour :class:`Executor`.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import numbers
import os
import pickle
import signal
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context, shared_memory
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import MappingProxyType, TracebackType
from typing import Any, NamedTuple, Protocol, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

from engine.process_setup import WORKER_ENVIRONMENT, keep_freed_memory, limit_blas_threads

__all__ = [
    "Executor",
    "ProcessExecutor",
    "SerialExecutor",
    "SharedData",
    "WorkerCrashedError",
    "make_executor",
    "resolve_n_jobs",
]

SharedData = Mapping[str, NDArray[Any]]
"""What a task function receives first: read-only arrays by name, shared by all tasks."""

T = TypeVar("T")
R = TypeVar("R")

_JOIN_TIMEOUT = 5.0  # seconds a terminated worker gets before it is killed outright


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


def _available_cpus() -> int:
    # Affinity respects `taskset` and CPU sets of containers, which os.cpu_count() ignores.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def resolve_n_jobs(n_jobs: int | None) -> int:
    """The number of worker processes ``n_jobs`` asks for.

    ``None`` means 1, ``-1`` all available CPUs, ``-k`` all but ``k - 1`` of them (at least 1),
    as in joblib and scikit-learn. ``0`` is refused.
    """
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be an int or None; got {n_jobs!r}.")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs=0 runs nothing; use 1 (or None) for serial, -1 for all CPUs.")
    if n_jobs < 0:
        return max(1, _available_cpus() + 1 + n_jobs)
    return n_jobs


def make_executor(shared: Mapping[str, NDArray[Any]], n_jobs: int | None, n_tasks: int) -> Executor:
    """The executor for ``n_tasks`` tasks under ``n_jobs``: in-process unless it can help.

    Never starts more workers than there are tasks; one worker or one task runs serially.
    """
    n_workers = min(resolve_n_jobs(n_jobs), n_tasks)
    if n_workers <= 1:
        return SerialExecutor(shared)
    return ProcessExecutor(shared, n_workers)


def _read_only(shared: Mapping[str, NDArray[Any]]) -> SharedData:
    views = {}
    for name, array in shared.items():
        view = np.asarray(array).view()
        view.flags.writeable = False
        views[name] = view
    return MappingProxyType(views)


class SerialExecutor:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


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


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection


def default_start_method() -> str:
    """``fork`` in a single-threaded process; otherwise ``forkserver`` (else ``spawn``).

    Forking a process that runs threads (a web server, a job worker with a heartbeat thread)
    copies locks other threads hold, and the child can deadlock on them; there
    ``forkserver`` forks workers from a clean single-threaded server process instead. A
    process with no other thread forks safely, and fork spares a plain script the
    ``if __name__ == "__main__":`` guard that ``forkserver`` and ``spawn`` require (they
    re-import the main module in every worker).
    """
    methods = get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


class ProcessExecutor:
    """Runs tasks in ``n_workers`` processes that see the arrays through shared memory.

    Each array is copied once into its own ``multiprocessing.shared_memory`` segment; workers
    map the segments as read-only NumPy views, so the arrays are never pickled, whatever the
    number of tasks. Tasks go to whichever worker is idle; results come back in task order.

    Parameters
    ----------
    shared : mapping of str to ndarray
        Arrays every task needs, of any non-object dtype and shape.
    n_workers : int
        Number of worker processes, at least 1.
    start_method : {"forkserver", "spawn"}, optional
        Defaults to :func:`default_start_method`.

    Notes
    -----
    One executor serves one caller at a time (one ``fit``); it is not meant to be shared between
    threads. Workers are daemonic, so the process creating them must not itself be a daemonic
    ``multiprocessing`` child. The segments are unlinked by :meth:`shutdown`, which runs on leaving the ``with`` block, when
    a ``map`` ends early, when the executor is garbage-collected and at interpreter exit; if the
    process is killed outright, multiprocessing's resource tracker unlinks them.
    """

    def __init__(
        self,
        shared: Mapping[str, NDArray[Any]],
        n_workers: int,
        *,
        start_method: str | None = None,
    ) -> None:
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers must be a positive int; got {n_workers!r}.")
        arrays = {name: _shareable(name, array) for name, array in shared.items()}
        context = get_context(start_method or default_start_method())
        if context.get_start_method() == "forkserver":
            # Workers then fork with NumPy and this module already imported (~0.3 s each
            # otherwise). Only takes effect when this starts the fork server; "__main__" is
            # multiprocessing's own default.
            context.set_forkserver_preload(["__main__", __name__])
        self._segments: list[shared_memory.SharedMemory] = []
        self._workers: list[_Worker] = []
        self._mapping = False
        # The finalizer holds the lists, not self, so it can run after self is gone.
        self._finalizer = weakref.finalize(self, _release, self._workers, self._segments)
        try:
            specs = [self._export(name, array) for name, array in arrays.items()]
            forked = context.get_start_method() == "fork"
            for index in range(n_workers):
                parent_end, child_end = context.Pipe(duplex=True)
                # A forked worker inherits the parent's ends of its own pipe and its elder
                # siblings'; it closes them, or a parent killed outright never reads as EOF.
                inherited = [worker.conn for worker in self._workers] + [parent_end]
                process = context.Process(  # type: ignore[attr-defined]  # typeshed: BaseContext
                    target=_worker_main,
                    args=(child_end, specs, inherited if forked else []),
                    name=f"coppice-worker-{index}",
                    daemon=True,
                )
                self._workers.append(_Worker(process, parent_end))
                process.start()
                child_end.close()  # so the worker's death reads as EOF here
        except BaseException:
            self.shutdown()
            raise

    @property
    def n_workers(self) -> int:
        return len(self._workers)

    @property
    def worker_pids(self) -> tuple[int | None, ...]:
        return tuple(worker.process.pid for worker in self._workers)

    def _export(self, name: str, array: NDArray[Any]) -> _SegmentSpec:
        segment = shared_memory.SharedMemory(create=True, size=max(array.nbytes, 1))
        self._segments.append(segment)
        _reserve(segment, name, array.nbytes)
        view: NDArray[Any] = np.ndarray(array.shape, array.dtype, buffer=segment.buf)
        np.copyto(view, array)
        del view  # a live view would keep the segment from closing
        return _SegmentSpec(name, segment.name, array.shape, array.dtype)

    def map(self, fn: Callable[[SharedData, T], R], tasks: Sequence[T]) -> Iterator[R]:
        self._check_usable()
        return self._run(fn, list(tasks))

    def _check_usable(self) -> None:
        if not self._finalizer.alive:
            raise RuntimeError("This executor has been shut down.")
        if self._mapping:
            raise RuntimeError("This executor is already running a map; finish it first.")

    def _run(self, fn: Callable[[SharedData, T], R], tasks: list[T]) -> Iterator[R]:
        self._check_usable()  # again: a generator starts when first iterated, not when made
        self._mapping = True
        idle = list(range(len(self._workers)))
        running: dict[int, int] = {}  # worker index -> task index
        replies: dict[int, _Reply] = {}  # task index -> reply not yet yielded
        next_task = next_result = 0
        failed = finished = False
        try:
            while next_result < len(tasks):
                if not self._finalizer.alive:
                    raise RuntimeError("This executor was shut down during a map.")
                # Refill before yielding, so workers keep busy while the consumer works. After a
                # failure nothing new starts: the map ends when it reaches the failed task.
                while idle and next_task < len(tasks) and not failed:
                    worker = idle.pop()
                    self._send(worker, (next_task, fn, tasks[next_task]))
                    running[worker] = next_task
                    next_task += 1
                if next_result in replies:
                    # Raising in task order, as the serial executor does, keeps n_jobs invisible.
                    yield _unwrap(replies.pop(next_result))
                    next_result += 1
                    continue
                for worker, reply in self._collect(running):
                    replies[running.pop(worker)] = reply
                    failed = failed or not reply.ok
                    idle.append(worker)
            finished = True
        finally:
            self._mapping = False
            if not finished:
                self.shutdown()

    def _send(self, worker: int, message: tuple[int, Any, Any]) -> None:
        conn = self._workers[worker].conn
        try:
            conn.send(message)
        except (BrokenPipeError, ConnectionResetError):
            if conn.poll():  # it said why before it left (it could not attach the arrays)
                _unwrap(_Reply(*conn.recv()))
            raise self._crashed(worker, message[0]) from None

    def _collect(self, running: dict[int, int]) -> list[tuple[int, _Reply]]:
        """Wait until busy workers answer or die; return ``(worker, reply)`` for each answer."""
        conns = {self._workers[w].conn: w for w in running}
        sentinels = {self._workers[w].process.sentinel: w for w in running}
        signalled = set(wait([*conns, *sentinels]))
        answers = []
        for conn, worker in conns.items():
            died = self._workers[worker].process.sentinel in signalled
            if conn in signalled or (died and conn.poll()):
                try:
                    _, ok, payload = conn.recv()
                except EOFError:
                    raise self._crashed(worker, running[worker]) from None
                # A worker runs one task at a time, so its answer belongs to that task, even
                # when the worker could not tell which (it failed to unpickle it).
                answers.append((worker, _Reply(running[worker], ok, payload)))
            elif died:
                raise self._crashed(worker, running[worker])
        return answers

    def _crashed(self, worker: int, task: int) -> WorkerCrashedError:
        process = self._workers[worker].process
        process.join(_JOIN_TIMEOUT)
        return WorkerCrashedError(
            f"Worker process {process.pid} died while running task {task} "
            f"({_describe_exit(process.exitcode)})."
        )

    def shutdown(self) -> None:
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = "; SIGKILL often means the out-of-memory killer" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


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


def _release(workers: list[_Worker], segments: list[shared_memory.SharedMemory]) -> None:
    try:
        for worker in workers:
            if worker.process.pid is not None and worker.process.exitcode is None:
                worker.process.terminate()
        for worker in workers:
            if worker.process.pid is not None:
                worker.process.join(_JOIN_TIMEOUT)
                if worker.process.exitcode is None:
                    worker.process.kill()
                    worker.process.join()
            worker.conn.close()
        workers.clear()
    finally:
        # Only after the workers are gone: their mappings die with them, and the resource
        # tracker then sees this process's unregister last.
        for segment in segments:
            segment.close()
            with contextlib.suppress(FileNotFoundError):  # someone else already removed it
                segment.unlink()
        segments.clear()


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
