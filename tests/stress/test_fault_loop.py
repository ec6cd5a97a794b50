"""A few rounds of the fault loop on each database; ``make faults`` runs the long version.

Four rounds strike each kind of fault once (a fit, the whole server, a worker, the API); see
``tests/stress/fault_loop.py`` for what each round checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stress.fault_loop import FAULTS, run_loop

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_no_job_is_lost_to_killed_processes(database: str, tmp_path: Path) -> None:
    report = run_loop(database, len(FAULTS), seed=7, root=tmp_path)

    assert not report.problems, report.summary()
    assert sum(report.faults.values()) == report.rounds == len(FAULTS), report.summary()
    assert report.outcomes["succeeded"] == report.predictions_checked > 0, report.summary()
