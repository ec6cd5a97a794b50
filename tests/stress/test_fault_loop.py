"""A short fault loop (SQLite in ``make test``, PostgreSQL in ``make long``); ``make faults``
runs 50 rounds of every fault on both.

Each kind of fault is struck once, on the database of the deployment it belongs to: a fit and
the whole ``coppice serve`` (API and embedded worker) on SQLite, the single-host default; a
standalone worker and an API replica on PostgreSQL, the production topology. See
``tests/stress/fault_loop.py`` for what each round checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stress.fault_loop import FAULTS, run_loop

pytestmark = pytest.mark.slow

FAULTS_BY_DATABASE = {"sqlite": ("fit", "server"), "postgres": ("worker", "api")}


def test_every_fault_is_struck_here() -> None:
    assert sorted(f for faults in FAULTS_BY_DATABASE.values() for f in faults) == sorted(FAULTS)


# Two rounds of up to ROUND_TIMEOUT each, and the processes' starts: past the suite's 300 s.
# The PostgreSQL rounds (a standalone worker and an API replica struck) run in `make long`, as
# `make test` must stay under 15 minutes on a loaded 2-core machine (issue 28); `make test`
# still kills a worker on PostgreSQL (tests/service/worker/test_worker_processes.py) and
# stops the database under a running service (tests/e2e/test_postgres_restart.py).
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "database",
    ["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.long])],
)
def test_no_job_is_lost_to_killed_processes(database: str, tmp_path: Path) -> None:
    faults = FAULTS_BY_DATABASE[database]
    report = run_loop(database, len(faults), seed=7, root=tmp_path, faults=faults)

    assert not report.problems, report.summary()
    # Each fault struck once. A fit kill must find a fit to kill: the long fits outlast the
    # moment it aims at (never "fit (missed: no fit left)", which the long loop tolerates).
    assert report.faults == dict.fromkeys(faults, 1), report.summary()
    assert report.rounds == len(faults), report.summary()
    assert report.outcomes["succeeded"] == report.predictions_checked > 0, report.summary()
