"""The local process pool: worker processes that see the shared arrays through shared memory."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.parallel._executor import R, SharedData, ShutsDownOnExit, T, WorkerCrashedError
from engine.parallel._shared import _reserve, _SegmentSpec, _shareable
from engine.parallel._worker import _Reply, _unwrap, _worker_main
from engine.process_setup import describe_exit, process_context

# Imported where workers are forked from: "__main__" is multiprocessing's own default for a
# fork server; this module and the loaded kernels spare each worker ~0.3 s and 1–3 s.
# Named, not imported: `python -m engine.warmup` must find engine.warmup not yet imported,
# and no plain import of engine.parallel should compile every kernel.
WORKER_PRELOAD = ("__main__", __name__, "engine._preload")

_JOIN_TIMEOUT = 5.0  # seconds a terminated worker gets before it is killed outright


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection


class ProcessExecutor(ShutsDownOnExit):
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
    start_method : {"fork", "forkserver", "spawn"}, optional
        Defaults to :func:`engine.process_setup.default_start_method`.
    preload : sequence of str
        Modules imported where workers are forked from (see
        :func:`engine.process_setup.process_context`): by default the loaded kernels.

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
        preload: Sequence[str] = WORKER_PRELOAD,
    ) -> None:
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers must be a positive int; got {n_workers!r}.")
        arrays = {name: _shareable(name, array) for name, array in shared.items()}
        context = process_context(preload, method=start_method)
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
            f"Worker process {process.pid} {describe_exit(process.exitcode)} "
            f"while running task {task}."
        )

    def shutdown(self) -> None:
        self._finalizer()


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
