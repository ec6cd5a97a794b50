"""The executor interface: same ordered results serially and in processes, shared read-only
arrays, prompt termination and no leaked shared memory.

Worker processes import the task functions below by name, so they live at module level.
Each process pool costs a few tenths of a second to start; the tests create only a handful.
"""

from __future__ import annotations

import errno
import importlib
import operator
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import parallel
from engine.callbacks import TrainingInterrupted
from engine.parallel import (
    ProcessExecutor,
    SerialExecutor,
    SharedData,
    WorkerCrashedError,
    make_executor,
    resolve_n_jobs,
)

NODE_DTYPE = np.dtype([("feature", "<i4"), ("threshold", "<f8"), ("left", "<i4")])


def _shared_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    nodes = np.zeros(3, dtype=NODE_DTYPE)
    nodes["feature"] = [2, -1, 0]
    nodes["threshold"] = [0.5, np.nan, -1.25]
    return {
        "X_binned": rng.integers(0, 255, size=(300, 6), dtype=np.uint8),
        "y": rng.normal(size=300),
        "nodes": nodes,
        "empty": np.zeros((0, 4)),
        "fortran": np.asfortranarray(rng.normal(size=(5, 3))),
    }


# --- task functions (module level: workers import them by name) -------------------------------


def _summarise(shared: SharedData, task: int) -> tuple[Any, ...]:
    # Later tasks finish first, so ordered output is not an accident of timing.
    time.sleep(0.02 * (6 - task) if task < 6 else 0)
    rows = np.random.default_rng(task).integers(0, shared["X_binned"].shape[0], size=50)
    digest = tuple(a.tobytes().hex()[:64] + str(a.shape) + a.dtype.str for a in shared.values())
    writeable = any(a.flags.writeable for a in shared.values())
    return (
        task,
        int(shared["X_binned"][rows].sum()),
        float(shared["y"][rows].sum()),
        digest,
        writeable,
    )


def _pid(shared: SharedData, task: int) -> int:
    time.sleep(0.05)
    return os.getpid()


def _write(shared: SharedData, task: str) -> None:
    if task == "assign":
        shared["X_binned"][0, 0] = 1
    else:
        shared["X_binned"].flags.writeable = True


def _fail(shared: SharedData, task: int) -> int:
    if task == 2:
        raise ValueError(f"task {task} found a broken split")
    return task


def _slow_after_first(shared: SharedData, task: int) -> int:
    if task > 0:
        time.sleep(60)
    return task


def _die(shared: SharedData, task: int) -> int:
    if task == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.1)
    return task


# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def created_segments(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of every shared-memory segment the parent creates; checked to be gone afterwards."""
    # A forking executor first imports the fork preload in the parent, whose kernel warm-up
    # fits small forests on processes of their own (their segments, not the test's): done
    # here, before recording, so that no test's count depends on whether it ran first.
    importlib.import_module("engine._preload")
    names: list[str] = []
    original = shared_memory.SharedMemory

    class Recording(original):  # type: ignore[misc, valid-type]
        def __init__(self, name: str | None = None, create: bool = False, size: int = 0) -> None:
            super().__init__(name=name, create=create, size=size)
            if create:
                names.append(self.name)

    monkeypatch.setattr(shared_memory, "SharedMemory", Recording)
    yield names
    monkeypatch.undo()
    for name in names:
        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)


def _assert_workers_gone(pids: tuple[int | None, ...]) -> None:
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# --- resolve_n_jobs and make_executor ----------------------------------------------------------


@pytest.mark.parametrize(
    ("n_jobs", "expected"),
    [(None, 1), (1, 1), (3, 3), (np.int64(2), 2), (-1, "all"), (-2, "all-1"), (-10_000, 1)],
)
def test_resolve_n_jobs(n_jobs: Any, expected: Any) -> None:
    cpus = parallel._available_cpus()
    wanted = {"all": cpus, "all-1": max(1, cpus - 1)}.get(expected, expected)
    assert resolve_n_jobs(n_jobs) == wanted


@pytest.mark.parametrize(
    ("n_jobs", "error"), [(0, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_resolve_n_jobs_refuses(n_jobs: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="n_jobs"):
        resolve_n_jobs(n_jobs)


@pytest.mark.parametrize(("n_jobs", "n_tasks"), [(None, 10), (1, 10), (4, 1), (-1, 0)])
def test_make_executor_runs_serially_when_parallelism_cannot_help(
    n_jobs: Any, n_tasks: int
) -> None:
    with make_executor(_shared_arrays(), n_jobs, n_tasks) as executor:
        assert isinstance(executor, SerialExecutor)


def _forest_in_a_daemon(results: Any) -> None:
    from engine import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    try:
        with make_executor(_shared_arrays(), 2, 10) as executor:
            kind = type(executor).__name__
        forest = RandomForestClassifier(n_estimators=4, n_jobs=2, random_state=0).fit(X, y)
        results.put((kind, float((forest.predict(X) == y).mean())))
    except Exception as error:  # reported, so the test fails at once with the reason
        results.put((repr(error), 0.0))


def test_a_daemonic_process_fits_serially_instead_of_failing() -> None:
    """A Dask worker under its nanny is daemonic and may not start processes: a member with
    ``n_jobs=2`` fitted there runs its trees serially (it used to fail with "daemonic
    processes are not allowed to have children")."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    daemon = context.Process(target=_forest_in_a_daemon, args=(results,), daemon=True)
    daemon.start()
    kind, accuracy = results.get(timeout=120)
    daemon.join(timeout=30)
    assert daemon.exitcode == 0
    assert kind == "SerialExecutor"
    assert accuracy > 0.9


def test_unshareable_array_is_refused_before_any_segment(created_segments: list[str]) -> None:
    shared = {"X": np.zeros(3), "labels": np.array(["a", None], dtype=object)}
    with pytest.raises(TypeError, match="labels"):
        ProcessExecutor(shared, 2)
    assert created_segments == []


# --- serial executor ---------------------------------------------------------------------------


def test_serial_executor_passes_read_only_views_without_copying() -> None:
    shared = _shared_arrays()
    seen: list[SharedData] = []

    def keep(data: SharedData, task: int) -> int:
        seen.append(data)
        return task

    with SerialExecutor(shared) as executor:
        assert list(executor.map(keep, range(3))) == [0, 1, 2]
        with pytest.raises(ValueError, match="read-only"):
            next(executor.map(_write, ["assign"]))
    assert np.shares_memory(seen[0]["X_binned"], shared["X_binned"])
    assert shared["X_binned"].flags.writeable  # the caller's array is untouched


def test_serial_executor_stops_when_the_consumer_does() -> None:
    ran: list[int] = []

    def record(data: SharedData, task: int) -> int:
        ran.append(task)
        return task

    executor = SerialExecutor({})
    for result in executor.map(record, range(10)):
        if result == 2:
            break
    assert ran == [0, 1, 2]
    with pytest.raises(RuntimeError, match="shut down"):
        executor.map(record, range(3))


# --- process executor --------------------------------------------------------------------------


def test_process_results_equal_serial_and_keep_task_order(created_segments: list[str]) -> None:
    shared = _shared_arrays()
    tasks = list(range(8))
    with SerialExecutor(shared) as serial:
        expected = list(serial.map(_summarise, tasks))
    with make_executor(shared, 2, len(tasks)) as executor:
        assert isinstance(executor, ProcessExecutor)
        assert executor.n_workers == 2
        assert list(executor.map(_summarise, tasks)) == expected
        # A second map on the same workers, spread over both of them.
        assert set(executor.map(_pid, range(4))) == set(executor.worker_pids)
        pids = executor.worker_pids
    assert all(writeable is False for *_, writeable in expected)
    assert len(created_segments) == len(shared)
    _assert_workers_gone(pids)


@pytest.mark.parametrize("how", ["assign", "flip-flag"])
def test_tasks_cannot_write_to_shared_arrays(how: str, created_segments: list[str]) -> None:
    with ProcessExecutor(_shared_arrays(), 1) as executor:
        with pytest.raises(ValueError, match=r"read-only|WRITEABLE"):
            list(executor.map(_write, [how]))
        with pytest.raises(RuntimeError, match="shut down"):
            executor.map(_pid, [0])  # a failed map ended the executor


def test_task_exception_reaches_the_caller_and_stops_the_rest(created_segments: list[str]) -> None:
    executor = ProcessExecutor(_shared_arrays(), 2)
    pids = executor.worker_pids
    results = []
    with pytest.raises(ValueError, match="task 2 found a broken split") as raised:
        for result in executor.map(_fail, range(5)):
            results.append(result)
    assert results == [0, 1]
    assert "Traceback" in str(raised.value.__cause__)  # the worker's own traceback
    _assert_workers_gone(pids)


@pytest.mark.parametrize("stop", ["break", TrainingInterrupted, KeyboardInterrupt])
def test_stopping_early_terminates_workers_promptly(stop: Any, created_segments: list[str]) -> None:
    started = time.monotonic()
    executor = ProcessExecutor(_shared_arrays(), 2)
    pids = executor.worker_pids
    expected = nullcontext() if stop == "break" else pytest.raises(stop)
    with expected, executor:
        for _ in executor.map(_slow_after_first, range(4)):
            if stop == "break":
                break
            raise stop("cancelled by the callback")
    assert time.monotonic() - started < 20  # the sleeping tasks (60 s) were not waited for
    _assert_workers_gone(pids)


def test_a_dead_worker_is_an_error_not_a_hang(created_segments: list[str]) -> None:
    with ProcessExecutor(_shared_arrays(), 2) as executor:
        pids = executor.worker_pids
        with pytest.raises(WorkerCrashedError, match="SIGKILL"):
            list(executor.map(_die, range(4)))
    _assert_workers_gone(pids)


def test_shutdown_during_a_map_ends_it(created_segments: list[str]) -> None:
    executor = ProcessExecutor(_shared_arrays(), 2)
    results = executor.map(_fail, [0, 1])
    assert next(results) == 0
    executor.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        next(results)
    with pytest.raises(RuntimeError, match="shut down"):
        executor.map(_fail, [0])


def test_spawned_workers_work_too(created_segments: list[str]) -> None:
    # operator.getitem as the task keeps the spawned interpreters from importing this module.
    shared = _shared_arrays()
    with ProcessExecutor(shared, 2, start_method="spawn") as executor:
        arrays = list(executor.map(operator.getitem, ["X_binned", "nodes"]))
    np.testing.assert_array_equal(arrays[0], shared["X_binned"])
    assert arrays[1].tobytes() == shared["nodes"].tobytes()


def test_full_shared_memory_is_an_error_and_leaks_nothing(
    created_segments: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.raises(OSError, match="Not enough shared memory for array 'X_binned'"):
        ProcessExecutor(_shared_arrays(), 2)
    assert len(created_segments) == 1


_ORPHAN_SCRIPT = """
import sys, time
import numpy as np
from engine.parallel import ProcessExecutor
executor = ProcessExecutor({"a": np.zeros(4)}, 2, start_method=sys.argv[1])
print(*executor.worker_pids, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_workers_exit_when_their_parent_is_killed(start_method: str) -> None:
    # A parent killed outright (the out-of-memory killer, say) cannot shut its workers down.
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, start_method], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while alive := [pid for pid in pids if _running(pid)]:
        assert time.monotonic() < deadline, f"workers {alive} outlived their killed parent"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an orphan's zombie, awaiting its reaper, is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


# Run in a fresh interpreter, whose allocator has not yet freed a large block: its forked
# worker starts as cold as the service's fit workers (forked from a fork server's child).
COLD_WORKER_SCRIPT = """
import resource
import numpy as np
from engine import DecisionTreeClassifier
from engine.parallel import ProcessExecutor

def faults_growing_a_tree(shared, n_rows):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 20))
    y = (X[:, 0] + rng.normal(size=n_rows) > 0).astype(int)
    DecisionTreeClassifier(random_state=0).fit(X, y)  # warm-up
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    DecisionTreeClassifier(random_state=0).fit(X, y)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

if __name__ == "__main__":
    with ProcessExecutor({}, 1, start_method="fork") as executor:
        (faults,) = executor.map(faults_growing_a_tree, [80_000])
    print(faults)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="tunes glibc's allocator only")
def test_a_cold_worker_reuses_freed_memory_instead_of_faulting_in_new_pages(
    tmp_path: Path,
) -> None:
    # Without keep_freed_memory, glibc unmaps or trims much of what the tree's growth frees
    # and faults it in again: 70,000–120,000 minor faults here, against 1,000–3,000.
    script = tmp_path / "cold_worker.py"
    script.write_text(COLD_WORKER_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) < 20_000, result.stdout
