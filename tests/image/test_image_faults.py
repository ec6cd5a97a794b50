"""The fault loop's promise, kept by containers: killed mid-fit, they lose no job.

One round each of ``tests/stress/fault_loop.py``'s power cut, with containers in place of
processes, on a throwaway database of the host's PostgreSQL: a ``coppice worker`` container
killed mid-fit (a new one takes over its jobs), and a ``coppice serve`` container with its
embedded worker killed mid-fit (the whole service restarts). The loop's own checks then run:
every job ended ``succeeded`` (its model predicts over HTTP) or ``failed`` with a reason, and
no model or artifact row lacks a succeeded job.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import free_port, wait_for_jobs
from tests.image.containers import Container, Engine
from tests.postgres import throwaway_database
from tests.stress.fault_loop import LONG_JOBS, LOOP_SETTINGS, ROUND_TIMEOUT, SHORT_JOBS, FaultLoop

# Two fits, one of them run twice, on a loaded machine may outlast pytest's default 300 s.
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(900)]


@pytest.mark.parametrize("killed", ["worker", "serve"])
def test_a_container_killed_mid_fit_loses_no_job(
    containers: Engine, killed: str, tmp_path: Path
) -> None:
    with throwaway_database() as url:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        env = {f"COPPICE_{key.upper()}": value for key, value in LOOP_SETTINGS.items()}
        env["COPPICE_DATABASE_URL"] = url
        # The host's network (for its PostgreSQL), and one /data that outlives each container.
        options = ("--network", "host", "-v", f"{containers.volume()}:/data")
        split = killed == "worker"

        def serve() -> Container:
            started = containers.start(
                "coppice", "serve", "--host", "127.0.0.1", "--port", str(port),
                env=env | {"COPPICE_EMBEDDED_WORKER": "false" if split else "true"},
                options=options,
            )  # fmt: skip
            started.wait_until_ready(base_url)
            return started

        def worker() -> Container:
            return containers.start("coppice", "worker", env=env, options=options)

        loop = FaultLoop("postgres", url, tmp_path, seed=11, verbose=False)
        try:
            api = serve()
            victim = worker() if split else api
            with httpx.Client(base_url=base_url, timeout=60) as client:
                loop.dataset_id = loop._upload(client)
                # A fit of seconds for the kill to land in, and a short one beside it.
                jobs = [loop._submit(client, kind) for kind in (LONG_JOBS[0], SHORT_JOBS[1])]
            # Mid-fit: a job has reported progress, and its fit runs on.
            deadline = time.monotonic() + 120
            while not loop._progress(jobs, 0.0):
                assert time.monotonic() < deadline, victim.logs()[-4000:]
                time.sleep(0.05)
            loop._note_states(jobs)
            victim.kill()
            if split:
                worker()
            else:
                serve()
            with httpx.Client(base_url=base_url, timeout=60) as client:
                wait_for_jobs(client, loop.job_ids, timeout=ROUND_TIMEOUT * 2)
                loop._check_jobs(client, 0)
            loop._check_rows(0)
        finally:
            containers.remove_all()
            loop.close()

    report = loop.report
    assert not report.problems, report.summary()
    assert report.struck["mid_fit"] + report.struck["finishing"] >= 1, report.summary()
    assert report.outcomes["succeeded"] == report.predictions_checked > 0, report.summary()
