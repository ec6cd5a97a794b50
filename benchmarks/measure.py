"""One measured run: fit and predict one model on one dataset in a fresh child process.

The child (started with ``spawn``: a fresh interpreter that shares no memory with this one)
loads the data, builds the model and reports ``ready``; the parent takes a baseline memory
sample of the child's process tree and answers ``go``; the child fits and reports ``fitted``,
the parent takes a last sample (the fitted model, with no prediction allocated yet) and
answers ``go`` again, and the child times batch prediction and single-row latency. From the
first ``go`` to that last sample the parent samples the memory of the child *and all its
descendants* (the engine's and loky's worker processes) with psutil.

Memory is sampled from the parent, not from a thread inside the child: a second thread in the
child would make the engine start its workers with ``forkserver`` rather than ``fork``
(see ``engine.parallel.default_start_method``), changing what is being measured.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.datasets import DatasetFiles, Task, load_dataset
from benchmarks.models import BuildContext, ModelSpec

__all__ = ["MemorySample", "RunJob", "RunResult", "measure_run"]

MIB = 1024 * 1024

# Children of the child are looked up on every sample during the first ~second (workers are
# starting) and then on every tenth: listing a process's children scans all of /proc
# (~2 ms here).
_EAGER_REFRESHES = 20
_REFRESH_EVERY = 10

# Reading a process's PSS walks its page tables: 10-30 ms for the engine's three processes,
# 30-90 ms for LightGBM's and XGBoost's large ones, which on 2 cores would take CPU from the fit
# being timed. The wait between samples grows so that sampling uses at most this share of
# one core (a 65 ms sample is followed by a ~0.6 s wait).
_SAMPLER_SHARE = 0.1


@dataclass(frozen=True)
class RunJob:
    """Everything a child needs; pickled to it, so the factory must be module-level."""

    model: ModelSpec
    context: BuildContext
    data: DatasetFiles
    predict: bool = True
    latency_calls: int = 200
    latency_warmup: int = 20


@dataclass(frozen=True)
class MemorySample:
    """Sum over a process tree of the proportional set size (PSS) and the resident set (RSS).

    PSS divides each shared page among the processes that map it, so the PSS of a tree counts
    memory shared between a parent and its workers (the engine's shared-memory training matrix,
    copy-on-write pages after ``fork``) once; the RSS sum counts it in every process.
    """

    pss: int = 0
    rss: int = 0
    processes: int = 0

    def peak(self, other: MemorySample) -> MemorySample:
        return MemorySample(
            max(self.pss, other.pss), max(self.rss, other.rss), max(self.processes, other.processes)
        )


@dataclass
class RunResult:
    """One run's measurements. Times in seconds (latency in ms), memory in MiB."""

    library: str
    fit_s: float | None = None
    predict_first_s: float | None = None
    predict_s: float | None = None
    latency_ms: float | None = None
    score: float | None = None
    metric: str = ""
    baseline_pss_mib: float | None = None
    peak_pss_mib: float | None = None
    peak_rss_sum_mib: float | None = None
    peak_processes: int | None = None
    main_peak_rss_mib: float | None = None  # the fitting process alone, kernel high-water
    # Coppice only: loading its compiled kernels in the fresh process, before the timed fit
    # (as importing a library's extension modules is not timed either); see engine.warmup.
    kernel_load_s: float | None = None
    memory_samples: int = 0
    sampling_s: float = 0.0  # the parent's time spent sampling: the measurement's own load
    load_average: float = field(default_factory=lambda: os.getloadavg()[0])
    error: str | None = None

    @property
    def fit_delta_mib(self) -> float | None:
        if self.peak_pss_mib is None or self.baseline_pss_mib is None:
            return None
        return self.peak_pss_mib - self.baseline_pss_mib

    def to_record(self) -> dict[str, Any]:
        """The JSON form: every field plus the derived fit delta."""
        return {**asdict(self), "fit_delta_mib": self.fit_delta_mib}

    def outcome(self) -> str:
        """One line for the progress log."""
        if self.error is not None:
            lines = self.error.strip().splitlines() or ["?"]
            return "FAILED: " + lines[-1]
        line = f"fit {self.fit_s:.2f} s, peak {self.peak_pss_mib:.0f} MiB"
        if self.predict_s is not None:
            line += f", predict {self.predict_s:.3f} s, 1-row {self.latency_ms:.2f} ms"
            line += f", {self.metric} {self.score:.4f}"
        return line


class ProcessTree:
    """Samples the memory of a process and all its descendants."""

    def __init__(self, pid: int) -> None:
        import psutil  # the parent only; the child never imports it

        self._psutil = psutil
        self._root = psutil.Process(pid)
        self._members: list[Any] = [self._root]
        self._samples = 0

    def sample(self) -> MemorySample:
        errors = (self._psutil.NoSuchProcess, self._psutil.ZombieProcess, self._psutil.AccessDenied)
        if self._samples < _EAGER_REFRESHES or self._samples % _REFRESH_EVERY == 0:
            with contextlib.suppress(*errors):
                self._members = [self._root, *self._root.children(recursive=True)]
        self._samples += 1
        pss = rss = count = 0
        for process in self._members:
            try:
                info = process.memory_full_info()  # smaps_rollup on Linux
            except errors:
                continue  # a worker that has just exited
            rss += info.rss
            pss += getattr(info, "pss", info.rss)  # PSS is Linux-only; elsewhere RSS stands in
            count += 1
        return MemorySample(pss, rss, count)


class ChildFailedError(RuntimeError):
    """The child raised, died or timed out; the message says which."""


def measure_run(
    job: RunJob, *, sample_interval: float = 0.05, timeout: float | None = None
) -> RunResult:
    """Run ``job`` in a fresh process and return its measurements (or the error it hit)."""
    result = RunResult(job.model.library, metric=_metric(job.context.task))
    context = get_context("spawn")
    ours, theirs = context.Pipe(duplex=True)
    process = context.Process(target=_child_main, args=(theirs, job), name="bench-child")
    process.start()
    theirs.close()  # so the child's death reads as EOF here
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        result.kernel_load_s = _receive(ours, process, "ready", deadline)
        tree = ProcessTree(_pid(process))
        baseline = peak = tree.sample()
        ours.send("go")
        samples, sampling_s, wait = 1, 0.0, sample_interval
        while not ours.poll(wait):
            _check_alive(process, deadline)
            start = time.perf_counter()
            peak = peak.peak(tree.sample())
            cost = time.perf_counter() - start
            sampling_s += cost
            samples += 1
            wait = max(sample_interval, cost * (1 - _SAMPLER_SHARE) / _SAMPLER_SHARE)
        fitted = _receive(ours, process, "fitted", deadline)
        peak = peak.peak(tree.sample())  # the child waits for "go": nothing else is running
        samples += 1
        ours.send("go")
        result.fit_s = fitted["fit_s"]
        result.main_peak_rss_mib = fitted["peak_rss_kib"] / 1024
        result.baseline_pss_mib = baseline.pss / MIB
        result.peak_pss_mib = peak.pss / MIB
        result.peak_rss_sum_mib = peak.rss / MIB
        result.peak_processes = peak.processes
        result.memory_samples = samples
        result.sampling_s = sampling_s
        done = _receive(ours, process, "done", deadline)
        for name in ("predict_first_s", "predict_s", "latency_ms", "score"):
            setattr(result, name, done.get(name))
    except ChildFailedError as exc:
        result.error = str(exc)
    finally:
        ours.close()
        _stop(process)
    return result


def _metric(task: Task) -> str:
    return "accuracy" if task == "classification" else "rmse"


def _pid(process: BaseProcess) -> int:
    assert process.pid is not None  # started
    return process.pid


def _check_alive(process: BaseProcess, deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise ChildFailedError("timed out")
    if not process.is_alive():
        raise ChildFailedError(f"child died (exit code {process.exitcode})")


def _receive(conn: Connection, process: BaseProcess, expected: str, deadline: float | None) -> Any:
    while not conn.poll(0.5):
        _check_alive(process, deadline)
    try:
        kind, payload = conn.recv()
    except EOFError:
        process.join(5)
        raise ChildFailedError(f"child died (exit code {process.exitcode})") from None
    if kind == "error":
        raise ChildFailedError(payload)
    if kind != expected:
        raise ChildFailedError(f"expected {expected!r} from the child, got {kind!r}")
    return payload


def _stop(process: BaseProcess) -> None:
    """Wait for a finished child; kill a stuck one together with the workers it started."""
    process.join(30)
    if process.exitcode is not None:
        return
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        for descendant in psutil.Process(_pid(process)).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                descendant.kill()
    process.kill()
    process.join()


# --- the child --------------------------------------------------------------------------------


def _child_main(conn: Connection, job: RunJob) -> None:
    # The markdown report goes to the parent's stdout; libraries that print (LightGBM,
    # XGBoost warnings) must not interleave with it.
    os.dup2(2, 1)
    try:
        data = load_dataset(job.data)
        model = job.model.build(job.context)
        conn.send(("ready", _load_engine_kernels()))
        conn.recv()  # the parent has its baseline sample
        start = time.perf_counter()
        model.fit(data.X_train, data.y_train)
        fit_s = time.perf_counter() - start
        conn.send(("fitted", {"fit_s": fit_s, "peak_rss_kib": _own_peak_rss_kib()}))
        conn.recv()  # the parent has its last sample of the fit
        report: dict[str, float] = {}
        if job.predict:
            report = _time_prediction(model, data.X_test, data.y_test, job)
        conn.send(("done", report))
    except BaseException:
        with contextlib.suppress(OSError):  # the parent may be gone
            conn.send(("error", traceback.format_exc()))
    finally:
        _release_worker_pools()
        conn.close()


def _load_engine_kernels() -> float | None:
    """Load Coppice's compiled kernels (from Numba's cache) if this run is Coppice's.

    A fresh process pays Numba's start-up and the cache loads (about 2 s) at its first
    kernel call; a service or notebook pays it once per process, not per fit, so it is
    measured apart from the fit.
    """
    if "engine" not in sys.modules:
        return None
    from engine.warmup import warm_kernels

    return warm_kernels()


def _release_worker_pools() -> None:
    """Stop joblib's loky workers (scikit-learn's Bagging uses them), which outlive a fit.

    A ``multiprocessing`` child joins its non-daemonic children before the ``atexit`` hooks
    that would stop loky's workers run, so without this the child never exits on its own.
    """
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)  # private; None unless a pool was started
    if executor is not None:
        executor.shutdown(wait=True)


def _own_peak_rss_kib() -> int:
    """This process's own high-water RSS, exact (the kernel keeps it), in KiB.

    ``VmHWM`` belongs to the address space, so it starts afresh at ``exec``; ``ru_maxrss``
    does not (Linux carries it across ``exec``), so a spawned child would report the size of
    the parent it was forked from. Descendants are not included: their memory is in the
    sampled PSS.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no /proc: macOS, in bytes
    return peak // 1024 if sys.platform == "darwin" else peak


def _time_prediction(
    model: Any, X_test: NDArray[np.float64], y_test: NDArray[Any], job: RunJob
) -> dict[str, float]:
    # The first call may pay one-off costs (the engine packs its trees on first use); the
    # second is what a serving process with a loaded model sees. Both are kept.
    start = time.perf_counter()
    model.predict(X_test)
    first = time.perf_counter() - start
    start = time.perf_counter()
    predictions = np.asarray(model.predict(X_test))
    warm = time.perf_counter() - start
    return {
        "predict_first_s": first,
        "predict_s": warm,
        "score": _score(job.context.task, predictions, y_test),
        "latency_ms": _single_row_latency_ms(model, X_test, job.latency_calls, job.latency_warmup),
    }


def _score(task: Task, predictions: NDArray[Any], y_true: NDArray[Any]) -> float:
    if task == "classification":
        return float(np.mean(predictions == y_true))
    return float(np.sqrt(np.mean((predictions.astype(np.float64) - y_true) ** 2)))


def _single_row_latency_ms(model: Any, X: NDArray[np.float64], calls: int, warmup: int) -> float:
    """Median wall time of ``predict`` on one row (a (1, p) array), cycling through rows."""
    rows = [X[i % len(X) : i % len(X) + 1] for i in range(warmup + calls)]
    times = []
    for index, row in enumerate(rows):
        start = time.perf_counter_ns()
        model.predict(row)
        elapsed = time.perf_counter_ns() - start
        if index >= warmup:
            times.append(elapsed)
    return float(np.median(times)) / 1e6
