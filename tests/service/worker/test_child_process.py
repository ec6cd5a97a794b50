"""A fit process stops once its worker is gone, even while the fork server that forked it lives.

CPython's fork server outlives a killed worker for as long as any child it forked runs (each
child holds the write end of the server's "alive" pipe), so the child's parent never changes and
``os.getppid()`` cannot tell. The pipe to the worker can: its reader is gone with the worker.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event

import pytest

from service.worker.fit_process import child_process

# Reports to make before giving up: the throttle passes one every 0.25 s.
DEADLINE_SECONDS = 60.0


def _report_until_stopped(
    reader: Connection, conn: Connection, stop: Event, exit_codes: dict[str, int]
) -> None:
    reader.close()  # forked, it has the worker's end too; a real fit process never holds it
    should_stop, on_progress = child_process(conn, stop)
    started = time.monotonic()
    step = 0
    while time.monotonic() - started < DEADLINE_SECONDS:
        if should_stop():
            raise SystemExit(exit_codes["stopped"])
        step += 1
        on_progress(min(step / 1e6, 0.99), f"tree {step}")
        time.sleep(0.01)
    raise SystemExit(exit_codes["ran_on"])


CODES = {"stopped": 3, "ran_on": 4}


@pytest.mark.parametrize("worker_alive", [False, True])
def test_the_fit_stops_once_nobody_reads_its_progress(worker_alive: bool) -> None:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    stop = context.Event()
    child = context.Process(target=_report_until_stopped, args=(receiver, sender, stop, CODES))
    child.start()
    sender.close()
    if worker_alive:
        # The worker reads the reports (its end open) and asks nothing: the fit runs on.
        started = time.monotonic()
        received = 0
        while time.monotonic() - started < 3.0:
            if receiver.poll(0.1):
                receiver.recv()
                received += 1
        assert received >= 2 and child.is_alive()
        stop.set()  # now the worker asks it to stop
    else:
        receiver.close()  # the worker is gone; its parent (this process) lives on
    child.join(DEADLINE_SECONDS + 30)
    assert child.exitcode == CODES["stopped"]
