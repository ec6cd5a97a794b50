"""The Dask backend on a real ``distributed.LocalCluster`` of two worker processes.

One cluster serves the module (starting one costs ~2 s); tests that kill a worker wait for its
nanny to bring a replacement up before they return, so the next test finds two workers again.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from engine import (
    BaggingClassifier,
    ConsensusClustering,
    ExtraTreesClassifier,
    GradingClassifier,
    RandomForestClassifier,
    StackingClassifier,
    TrainingInterrupted,
    VotingClassifier,
    XGBoostClassifier,
    XGBoostRegressor,
    bias_variance_decomposition,
    parallel_backend,
)
from engine.callbacks import ProgressEvent
from engine.linear import LogisticRegression
from engine.parallel import _dask, _dask_histograms, make_executor
from engine.tree import DecisionTreeClassifier

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    # No default client, as in the service (service/training/cluster.py): the backend must
    # use the client it is handed, never find one of its own.
    with distributed.Client(cluster, set_as_default=False) as client:
        yield client
    cluster.close()


@pytest.fixture
def healthy(client: Any) -> Any:
    """The module's client, with both workers up (a test before may have killed one)."""
    client.wait_for_workers(2, timeout=60)
    return client


def _classification(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    return X, (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)


def _kill_worker_at(client: Any, iteration: int, in_flight: list[int] | None = None) -> Any:
    """A callback that SIGKILLs one Dask worker when ``iteration`` is reported (mid-fit).

    With ``in_flight``, the kill waits (up to 5 s) until the scheduler has a task on that
    worker, and the list receives how many it had: the tasks Dask must run again elsewhere.
    The scheduler queues tasks and hands each worker about one at a time, so a worker can
    be between two tasks at the moment of a callback.
    """
    pid_of = client.run(os.getpid)
    victim = min(pid_of, key=pid_of.__getitem__)

    def callback(event: ProgressEvent) -> None:
        if event.done == iteration:
            if in_flight is not None:
                deadline = time.monotonic() + 5
                busy = len(client.processing([victim])[victim])
                while not busy and time.monotonic() < deadline:
                    time.sleep(0.01)
                    busy = len(client.processing([victim])[victim])
                in_flight.append(busy)
            os.kill(pid_of[victim], signal.SIGKILL)

    return callback


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Wrap ``owner.name`` so each call appends to the returned list."""
    calls: list[int] = []
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_forest_matches_local_and_reports_progress(healthy: Any) -> None:
    X, y = _classification()
    local_events: list[ProgressEvent] = []
    dask_events: list[ProgressEvent] = []
    local = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=7, oob_score=True)
    local.fit(X, y, callbacks=[local_events.append])
    remote = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=7, oob_score=True)
    with parallel_backend(healthy):
        remote.fit(X, y, callbacks=[dask_events.append])
    np.testing.assert_array_equal(local.predict_proba(X), remote.predict_proba(X))
    assert local.oob_score_ == remote.oob_score_
    assert [(e.done, e.total, dict(e.metrics)) for e in dask_events] == [
        (e.done, e.total, dict(e.metrics)) for e in local_events
    ]


def test_stacking_members_and_folds_match_local(healthy: Any) -> None:
    X, y = _classification(300)
    members = [
        ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
        ("linear", LogisticRegression()),
    ]
    local = StackingClassifier(members, cv=3, random_state=0).fit(X, y)
    with parallel_backend(healthy):
        remote = StackingClassifier(members, cv=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(local.predict_proba(X), remote.predict_proba(X))


_MEMBERS = [
    ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
    ("linear", LogisticRegression()),
]


@pytest.mark.parametrize(
    "make",
    [
        lambda: ExtraTreesClassifier(n_estimators=6, random_state=4),
        lambda: BaggingClassifier(n_estimators=6, random_state=4),
        lambda: VotingClassifier(_MEMBERS, voting="soft"),
        lambda: GradingClassifier(_MEMBERS, cv=3, random_state=0),
    ],
    ids=["extra_trees", "bagging", "voting", "grading"],
)
def test_the_other_ensembles_match_local(healthy: Any, make: Any) -> None:
    # The issue's list beside forests and stacking: extra trees' and bagging's trees, voting's
    # members, grading's members and folds.
    X, y = _classification(300)
    local = make().fit(X, y)
    with parallel_backend(healthy):
        remote = make().fit(X, y)
    np.testing.assert_array_equal(local.predict_proba(X), remote.predict_proba(X))


def test_shared_arrays_are_scattered_once_to_every_worker(
    healthy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    scatters = _count_calls(monkeypatch, _dask.DaskExecutor, "_scatter")

    def _rows(shared: Any, task: int) -> int:
        return int(shared["x"].shape[0]) + task

    with parallel_backend(healthy), make_executor({"x": np.arange(1000.0)}, 1, 8) as executor:
        assert list(executor.map(_rows, list(range(8)))) == [1000 + i for i in range(8)]
        assert isinstance(executor, _dask.DaskExecutor)
        holders = healthy.who_has(list(executor._shared.values()))
    assert len(scatters) == 1
    workers = set(healthy.scheduler_info()["workers"])
    assert all(set(held) == workers for held in holders.values()), holders


def test_bias_variance_rounds_and_consensus_resamples_match_local(healthy: Any) -> None:
    X, y = _classification(200)
    tree = DecisionTreeClassifier(max_depth=3)
    kwargs: dict[str, Any] = {"loss": "0-1", "n_rounds": 4, "random_state": 2}
    local = bias_variance_decomposition(tree, X, y, **kwargs)
    clusters = ConsensusClustering(n_clusters=3, n_partitions=4, random_state=0).fit(X)
    with parallel_backend(healthy):
        remote = bias_variance_decomposition(tree, X, y, **kwargs)
        remote_clusters = ConsensusClustering(n_clusters=3, n_partitions=4, random_state=0).fit(X)
    assert remote == local
    np.testing.assert_array_equal(remote_clusters.consensus_matrix_, clusters.consensus_matrix_)


def test_tasks_see_read_only_arrays_and_errors_come_back(healthy: Any) -> None:
    # Defined here: the workers cannot import this test module (pytest's importlib mode), and
    # a local function travels by value.
    def _square(shared: Any, task: int) -> float:
        return float(shared["x"].sum()) * task

    def _write(shared: Any, task: int) -> None:
        shared["x"][0] = task

    with parallel_backend(healthy):
        with make_executor({"x": np.arange(4.0)}, 1, 3) as executor:
            assert list(executor.map(_square, [1, 2, 3])) == [6.0, 12.0, 18.0]
        with (
            make_executor({"x": np.arange(4.0)}, 1, 2) as executor,
            pytest.raises(ValueError, match="read-only"),
        ):
            list(executor.map(_write, [1, 2]))


def test_cancelling_a_fit_cancels_its_outstanding_tasks(healthy: Any) -> None:
    X, y = _classification()

    def cancel(event: ProgressEvent) -> None:
        if event.done == 2:
            raise TrainingInterrupted("cancelled")

    forest = RandomForestClassifier(n_estimators=40, random_state=0)
    with parallel_backend(healthy), pytest.raises(TrainingInterrupted):
        forest.fit(X, y, callbacks=[cancel])
    assert not hasattr(forest, "members_")

    def scheduler_tasks(dask_scheduler: Any) -> int:
        return len(dask_scheduler.tasks)

    # The remaining trees and the scattered arrays are released, not left running.
    deadline = time.monotonic() + 5
    while healthy.run_on_scheduler(scheduler_tasks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert healthy.run_on_scheduler(scheduler_tasks) == 0


def test_cancelling_a_boosting_fit_releases_its_partitions(healthy: Any) -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1000, 5))

    def cancel(event: ProgressEvent) -> None:
        if event.done == 2:
            raise TrainingInterrupted("cancelled")

    with parallel_backend(healthy), pytest.raises(TrainingInterrupted):
        XGBoostRegressor(n_estimators=20, max_depth=3).fit(X, X[:, 0], callbacks=[cancel])

    def actors(dask_worker: Any) -> int:
        return len(dask_worker.state.actors)

    # The partitions' actors go with their futures, released when the fit stops.
    deadline = time.monotonic() + 5
    while any(healthy.run(actors).values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(healthy.run(actors).values())


def test_forest_survives_a_worker_killed_mid_fit(healthy: Any) -> None:
    X, y = _classification(2000)
    # Enough trees that the victim still holds some when the first comes back: 24 small trees
    # could all be done by then once each takes a few milliseconds.
    local = RandomForestClassifier(n_estimators=200, random_state=3).fit(X, y)
    remote = RandomForestClassifier(n_estimators=200, random_state=3)
    # Killed at the first tree back, while most trees are still queued or running.
    in_flight: list[int] = []
    with parallel_backend(healthy):
        remote.fit(X, y, callbacks=[_kill_worker_at(healthy, 1, in_flight)])
    assert in_flight and in_flight[0] > 0, f"the killed worker held no tree: {in_flight}"
    np.testing.assert_array_equal(local.predict_proba(X), remote.predict_proba(X))


def test_lost_shared_arrays_are_scattered_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copy lost: a one-worker cluster whose worker is killed (its nanny starts another)."""
    scatters = _count_calls(monkeypatch, _dask.DaskExecutor, "_scatter")
    X, y = _classification(2000)
    local = RandomForestClassifier(n_estimators=24, random_state=3).fit(X, y)
    remote = RandomForestClassifier(n_estimators=24, random_state=3)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
        parallel_backend(client),
    ):
        remote.fit(X, y, callbacks=[_kill_worker_at(client, 1)])
    assert len(scatters) == 2
    np.testing.assert_array_equal(local.predict_proba(X), remote.predict_proba(X))


def test_boosting_builds_histograms_on_the_workers_and_matches_local(healthy: Any) -> None:
    """Data-parallel boosting equals the local model up to summation order.

    Leaf values come from the driver's own row sums, identical to the local fit's; only the
    split gains read the summed partition histograms, whose bins add the same rows in another
    association (partition by partition, then across partitions). A change of order moves a
    sum by a few ulps, so a split could differ only where two candidates' gains tie to
    ~1e-12 relative, which random continuous data does not produce: the trees are expected
    identical, and predictions are held to 1e-12.
    """
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 8))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.1 * rng.normal(size=3000)
    params: dict[str, Any] = {"n_estimators": 8, "max_depth": 4, "random_state": 1}
    local = XGBoostRegressor(**params).fit(X, y)
    with parallel_backend(healthy):
        remote = XGBoostRegressor(**params).fit(X, y)
    np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)
    for local_stage, remote_stage in zip(local.estimators_, remote.estimators_, strict=True):
        for a, b in zip(local_stage, remote_stage, strict=True):
            np.testing.assert_array_equal(a.nodes["feature"], b.nodes["feature"])
            np.testing.assert_array_equal(a.nodes["threshold"], b.nodes["threshold"])

    yc = (y > np.median(y)).astype(int)
    params.update(subsample=0.7, colsample_bytree=0.8)
    local_c = XGBoostClassifier(**params).fit(X, yc)
    with parallel_backend(healthy):
        remote_c = XGBoostClassifier(**params).fit(X, yc)
    np.testing.assert_allclose(
        remote_c.predict_proba(X), local_c.predict_proba(X), rtol=0, atol=1e-12
    )


def test_boosting_survives_a_worker_killed_mid_fit(
    healthy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    recoveries = _count_calls(monkeypatch, _dask_histograms.DaskHistograms, "recover")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 6))
    y = X[:, 0] - X[:, 2] ** 2
    params: dict[str, Any] = {"n_estimators": 6, "max_depth": 3, "random_state": 0}
    local = XGBoostRegressor(**params).fit(X, y)
    with parallel_backend(healthy):
        remote = XGBoostRegressor(**params).fit(X, y, callbacks=[_kill_worker_at(healthy, 2)])
    # The next level's request found the partition's worker gone (the scheduler may not have
    # noticed yet) and moved the partition.
    assert len(recoveries) == 1
    np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=0, atol=1e-12)


def test_parallel_backend_refuses_what_is_not_a_client() -> None:
    with pytest.raises(TypeError, match=r"distributed\.Client"), parallel_backend("tcp://x:8786"):
        pass
