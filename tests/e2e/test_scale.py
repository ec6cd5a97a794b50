"""The scale test (``make scale-test``, :mod:`benchmarks.scale_test`) at 2 M rows: written by
the Dask workers, registered and trained through the service on two single-thread workers of
1 GiB each.

Marked ``long``: on the shared 2-core machine it took 3 min 6 s (load 14), far past what
``make test`` can spend on one test; ``make long`` runs it. The full 16 M rows run only as
``make scale-test``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

pytest.importorskip("distributed")

pytestmark = [pytest.mark.long, pytest.mark.slow]


def test_two_million_rows_train_out_of_core_through_the_service(tmp_path: Path) -> None:
    from benchmarks.scale_test import run

    args = argparse.Namespace(
        rows=2_000_000,
        features=24,
        workers=2,
        memory_limit="1GiB",
        method="xgboost",
        rounds=5,
        max_depth=6,
        holdout=0.2,
        seed=0,
        dir=str(tmp_path),
    )
    report = run(args)
    print(report)
    assert report["job_status"] == "succeeded", report
    assert not report["workers_restarted"], report
    assert report["resources"]["backend"] == "dask"
    assert report["resources"]["dask_workers"] == 2
