"""Real ``coppice`` processes for end-to-end tests and benchmarks, never left behind.

Each process is ``python -m service <command>`` (the ``coppice`` console script's own code
path) with every ``COPPICE_*`` variable of the caller's environment removed and the given
settings set, its output in a log file. It starts in a session of its own, so that
:meth:`Processes.stop_all` can find and kill everything it started — the embedded or
standalone worker's fork server and fit processes included (a fit leads its own process group,
but stays in its worker's session) — even when the process itself was killed first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# Ended job statuses (see docs/api.md, "How a job moves").
ENDED = frozenset({"succeeded", "failed", "cancelled"})


def free_port() -> int:
    """A TCP port nobody listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def coppice_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without ``COPPICE_*``, plus ``settings`` as ``COPPICE_*``.

    A ``COPPICE_DATABASE_URL`` in the developer's shell must never reach a test's server.
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
    return env | {f"COPPICE_{name.upper()}": value for name, value in settings.items()}


@dataclass
class Started:
    """One started ``coppice`` process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Processes:
    """Starts ``coppice`` commands with shared settings; :meth:`stop_all` ends every one."""

    def __init__(self, log_dir: Path, **settings: str) -> None:
        self.log_dir = log_dir
        self.settings = settings
        self.started: list[Started] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *command: str, **settings: str) -> Started:
        """Start ``coppice <command>`` (e.g. ``"worker"``); ``settings`` add to the shared ones."""
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "service", *command],
                env=coppice_environment(self.settings | settings),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Started(name, process, log_path)
        self.started.append(started)
        return started

    def run(self, *command: str, timeout: float = 120.0, **settings: str) -> str:
        """Run ``coppice <command>`` to its end (e.g. ``"migrate"``); returns its output."""
        result = subprocess.run(
            [sys.executable, "-m", "service", *command],
            env=coppice_environment(self.settings | settings),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"coppice {' '.join(command)} failed:\n{output}"
        return output

    def logs(self) -> str:
        """Every process's log, headed by its name: for assertion messages."""
        return "\n".join(
            f"--- {s.name} (pid {s.pid}) ---\n{s.log_text()[-4000:]}" for s in self.started
        )

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM what still runs, wait up to ``timeout``, then SIGKILL all that is left.

        Whatever happened before, nothing started here survives: every process still in one
        of their sessions (fork servers, fit processes, orphans of a killed worker) is killed.
        """
        for started in self.started:
            if started.alive():
                with contextlib.suppress(ProcessLookupError):
                    started.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for started in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                started.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        kill_sessions(s.pid for s in self.started)
        for started in self.started:
            started.process.wait()


def kill_sessions(session_ids: Iterable[int]) -> None:
    """SIGKILL every process whose session is one of ``session_ids``, until none is left."""
    sessions = set(session_ids)
    for _ in range(50):
        members = [member.pid for member in live_processes() if member.session in sessions]
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


@dataclass(frozen=True, slots=True)
class Member:
    """A live process: its id, its process group and its session."""

    pid: int
    group: int
    session: int


def live_processes() -> list[Member]:
    """Every live (not zombie) process, from ``/proc``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after it do not.
        state, _ppid, group, session = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z":
            found.append(Member(int(entry.name), int(group), int(session)))
    return found


def fit_processes(session_id: int) -> list[int]:
    """Pids of the fit processes a worker in session ``session_id`` runs now.

    A fit leads a process group of its own inside its worker's session (see
    ``service.worker.fit_process.fit_process_main``); nothing else there does.
    """
    return [
        member.pid
        for member in live_processes()
        if member.session == session_id and member.group == member.pid != session_id
    ]


def wait_until_ready(base_url: str, started: Started, timeout: float = 60.0) -> None:
    """Wait for ``/v2/health/ready`` to answer 200; fail with the log if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert started.alive(), f"{started.name} exited:\n{started.log_text()}"
        # Refused connections are expected until uvicorn has bound the port.
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base_url}/v2/health/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{started.name} did not become ready:\n{started.log_text()}")


def start_server(processes: Processes, name: str, **settings: str) -> tuple[str, Started]:
    """``coppice serve`` on a free port; its base URL and process, once it is ready."""
    port = free_port()
    server = processes.start(name, "serve", "--port", str(port), **settings)
    base_url = f"http://127.0.0.1:{port}"
    wait_until_ready(base_url, server)
    return base_url, server


# Settings of a server under test: two fits at a time (on two cores the short fits overlap
# their start-up and I/O), quick polling, and a short grace so a failed test's teardown
# does not wait the default 30 s.
TEST_SERVER_SETTINGS = {
    "embedded_worker": "true",
    "worker_concurrency": "2",
    "poll_seconds": "0.2",
    "shutdown_grace_seconds": "5",
    "log_format": "text",
}


@contextlib.contextmanager
def serving(root: Path, **settings: str) -> Iterator[tuple[str, Processes]]:
    """``coppice serve`` with its embedded worker on a SQLite file under ``root``.

    Yields the base URL and the :class:`Processes` (for logs); everything is stopped on exit.
    ``settings`` override :data:`TEST_SERVER_SETTINGS`.
    """
    processes = Processes(
        root / "logs", data_dir=str(root / "data"), **(TEST_SERVER_SETTINGS | settings)
    )
    try:
        base_url, _ = start_server(processes, "serve")
        yield base_url, processes
    finally:
        processes.stop_all()


def submit_job(client: httpx.Client, **body: Any) -> str:
    """``POST /v1/jobs`` with ``body``; returns the new job's id (the answer must be a 202)."""
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def wait_for_jobs(
    client: httpx.Client, job_ids: Iterable[str], *, timeout: float, logs: Processes | None = None
) -> dict[str, dict[str, Any]]:
    """Poll ``GET /v1/jobs/{id}`` until every job has ended; returns them by id.

    On timeout the test fails with each unfinished job's status and stage (and the logs).
    """
    pending = list(job_ids)
    ended: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for job_id in list(pending):
            response = client.get(f"/v1/jobs/{job_id}")
            assert response.status_code == 200, response.text
            job = response.json()
            if job["status"] in ENDED:
                ended[job_id] = job
                pending.remove(job_id)
            elif time.monotonic() > deadline:
                stuck = [client.get(f"/v1/jobs/{i}").json() for i in pending]
                summary = [(j["method"], j["status"], j["stage"], j["attempts"]) for j in stuck]
                raise AssertionError(
                    f"{len(pending)} job(s) not ended after {timeout:.0f} s: {summary}\n"
                    + (logs.logs() if logs else "")
                )
        if pending:
            time.sleep(0.2)
    return ended
