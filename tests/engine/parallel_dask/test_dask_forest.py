"""Out-of-core forests and extra trees (``fit_parts``) on a real ``LocalCluster``.

The table is written as real Parquet parts, read by the reader of ``test_dask_parts`` (it
travels by value and logs the pid of every open). Targets are class labels or eighths and
the weights integers, so every sum over the rows is exact in any order and the out-of-core
forest is the local one to the bit (engine.ensemble._forest_parts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import (
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    parallel_backend,
)
from engine.ensemble import _forest_parts, _sampling
from engine.parallel._parts import deal_rows

distributed = pytest.importorskip("distributed")
pq = pytest.importorskip("pyarrow.parquet")
_dask_parts = pytest.importorskip("engine.parallel._dask_parts")
from tests.engine.parallel_dask.test_dask_parts import (  # noqa: E402
    SIZES,
    _scale,
    _table,
    read_part,
    write_parts,
)

CLASSIFIER = {"n_estimators": 10, "max_depth": 5, "random_state": 1, "max_features": 3}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster
    with contextlib.suppress(KeyError):  # the teardown race test_dask_parts describes
        cluster.close()


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster, set_as_default=False) as client:
        _scale(cluster, client, 2)
        yield client


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 500 rows: each worker's range cuts through blocks, and the totals' draw
    (one multinomial over six blocks) is made."""
    monkeypatch.setattr(_sampling, "BOOTSTRAP_BLOCK_ROWS", 500)


def _classes(y: np.ndarray) -> np.ndarray:
    return np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(float)


def test_out_of_core_forests_equal_the_single_machine_fit_on_1_2_3_workers(
    cluster: Any, client: Any, tmp_path: Path
) -> None:
    X, y = _table()
    y3, y8 = _classes(y), np.round(y * 8) / 8
    w = np.random.default_rng(3).integers(1, 3, size=y.size).astype(float)
    w[::17] = 0.0  # rows in no tree and in no edge: scored all the same
    classified = write_parts(tmp_path / "c", X, y3, SIZES, w=w)
    regressed = write_parts(tmp_path / "r", X, y8, SIZES)
    fits = [
        (RandomForestClassifier, CLASSIFIER, classified, y3, w),
        (
            RandomForestRegressor,
            {**CLASSIFIER, "max_samples": 0.6, "min_samples_leaf": 3},
            regressed,
            y8,
            None,
        ),
        (ExtraTreesRegressor, {**CLASSIFIER, "bootstrap": True}, regressed, y8, None),
    ]
    # On a cluster rows of weight 0 take no part: the reference is the fit on the others.
    locals_ = [
        cls(**params).fit(
            X[weights > 0] if weights is not None else X,
            target[weights > 0] if weights is not None else target,
            sample_weight=None if weights is None else weights[weights > 0],
        )
        for cls, params, _, target, weights in fits
    ]
    for n_workers in (1, 2, 3):
        _scale(cluster, client, n_workers)
        for (cls, params, parts, _, _), local in zip(fits, locals_, strict=True):
            with parallel_backend(client):
                remote = cls(**params).fit_parts(parts, read_part)
            np.testing.assert_array_equal(
                remote.bin_mapper_.thresholds_, local.bin_mapper_.thresholds_
            )
            assert remote.n_estimators_ == local.n_estimators_ == 10
            for a, b in zip(local.members_, remote.members_, strict=True):
                np.testing.assert_array_equal(a.nodes["feature"], b.nodes["feature"])
                np.testing.assert_array_equal(a.nodes["threshold"], b.nodes["threshold"])
            np.testing.assert_array_equal(remote.estimators_seeds_, local.estimators_seeds_)
            if hasattr(local, "predict_proba"):
                np.testing.assert_array_equal(remote.predict_proba(X), local.predict_proba(X))
            else:
                np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)
            np.testing.assert_array_equal(remote.in_bag_counts(4), local.in_bag_counts(4))


def test_forest_parts_are_opened_only_in_worker_processes(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "opens.log"
    X, y = _table()
    parts = write_parts(tmp_path / "parts", X, _classes(y), SIZES, log=str(log))

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the fit process opened a Parquet file")

    monkeypatch.setattr(pq, "read_table", refuse)
    monkeypatch.setattr(pq, "ParquetFile", refuse)
    with parallel_backend(client):
        RandomForestClassifier(**CLASSIFIER).fit_parts(parts, read_part)
    opens = [line.split() for line in log.read_text().splitlines()]
    workers = set(client.run(os.getpid).values())
    assert {int(pid) for pid, _ in opens} <= workers
    assert os.getpid() not in {int(pid) for pid, _ in opens}
    assert len(opens) == 3 * sum(len(g) for g in deal_rows(parts, len(workers)))


@pytest.mark.parametrize("when", ["between batches", "mid batch"])
def test_a_worker_killed_mid_forest_is_replaced_and_the_forest_is_the_same(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """SIGKILL a worker holding rows: its new actor reads its parts again and adds the trees
    of the finished batches to its rows' sums; the batch growing is grown again. The forest
    is the one without the loss, and the fit never hangs."""
    monkeypatch.setattr(_forest_parts, "TREES_PER_BATCH", 4)
    X, y = _table()
    parts = write_parts(tmp_path, X, _classes(y), SIZES)
    local = RandomForestClassifier(**CLASSIFIER).fit(X, _classes(y))
    pid_of = client.run(os.getpid)
    victim = min(pid_of, key=pid_of.__getitem__)
    replaced: list[list[int]] = []
    original = _dask_parts.DaskPartitions.replace

    def replace(self: Any, lost: Any, replay: Any) -> None:
        replaced.append(list(lost))
        original(self, lost, replay)

    monkeypatch.setattr(_dask_parts.DaskPartitions, "replace", replace)
    callbacks: list[Any] = []
    if when == "mid batch":
        ask = _forest_parts.ForestBatch.ask
        calls: list[int] = []

        def kill_in_batch(self: Any, requests: Any) -> Any:
            calls.append(1)
            if len(calls) == 9:  # the second batch, a few levels in
                os.kill(pid_of[victim], signal.SIGKILL)
            return ask(self, requests)

        monkeypatch.setattr(_forest_parts.ForestBatch, "ask", kill_in_batch)
    else:

        def kill(event: Any) -> None:
            if event.done == 4:
                os.kill(pid_of[victim], signal.SIGKILL)

        callbacks = [kill]
    start = time.monotonic()
    with parallel_backend(client):
        remote = RandomForestClassifier(**CLASSIFIER).fit_parts(
            parts, read_part, callbacks=callbacks
        )
    assert time.monotonic() - start < 120
    assert replaced == [[sorted(pid_of).index(victim)]]
    np.testing.assert_array_equal(remote.predict_proba(X), local.predict_proba(X))


def test_what_needs_every_row_in_one_place_is_refused(client: Any, tmp_path: Path) -> None:
    X, y = _table()
    parts = write_parts(tmp_path, X, y, SIZES)
    model = RandomForestRegressor(oob_score=True, max_leaf_nodes=8)
    assert model.out_of_core_refusals() == ["oob_score=True", "max_leaf_nodes"]
    assert RandomForestRegressor().out_of_core_refusals() == []
    with parallel_backend(client), pytest.raises(ValueError, match="oob_score"):
        model.fit_parts(parts, read_part)
