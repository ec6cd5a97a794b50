"""Searches through the client, against a real server: waiting with progress, the leaderboard with
and without pandas, the best model and its registration, cancelling (and Ctrl-C while waiting),
failures and refusals. Searches stay tiny: 2-3 candidates of a few trees, 2 folds."""

from __future__ import annotations

import sys
import time
import uuid

import pandas as pd
import pytest

from coppice import (
    Client,
    ConflictError,
    Dataset,
    JobCancelledError,
    Model,
    Search,
    SearchFailedError,
    ValidationError,
)
from tests.client.helpers import LONG_FIT, churn_frame, interrupt_waiter

SMALL = {"decision_tree": {"max_depth": [1, 2, 3]}, "random_forest": {"n_estimators": 5}}


@pytest.fixture(scope="module")
def churn(server_url: str) -> Dataset:
    return Client(server_url).upload(churn_frame(240), name="search-churn")


def test_a_search_waits_with_progress_then_ranks_registers_and_stacks(
    client: Client, churn: Dataset, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"searched-{uuid.uuid4().hex[:8]}"
    search = client.search(
        churn,
        target="churned",
        candidates=SMALL,
        max_models=3,
        folds=2,
        stack=True,
        register_as=name,
        seed=0,
        name="small search",
    )
    assert isinstance(search, Search) and search.status == "running"
    assert search.planned == 3 and search.name == "small search"

    assert search.wait(progress=True, timeout=120) is search

    bar = capsys.readouterr().err
    assert f"search {search.id[:8]}" in bar and "candidates" in bar, bar
    assert "100%" in bar and "succeeded: 4 ranked, best roc_auc" in bar, bar
    assert (search.status, search.progress, search.n_models) == ("succeeded", 1.0, 4)
    assert (search.metric, search.direction, search.strategy) == ("roc_auc", "maximize", "random")
    board = search.leaderboard
    assert isinstance(board, pd.DataFrame) and board.attrs["metric"] == "roc_auc"
    assert list(board.columns[:5]) == ["rank", "model_id", "method", "roc_auc", "roc_auc_std"]
    assert list(board["rank"]) == [1, 2, 3, 4]
    assert board["roc_auc"].is_monotonic_decreasing
    assert sorted(board["kind"]) == ["candidate"] * 3 + ["stack"]
    best = search.best_model
    assert isinstance(best, Model) and best.id == board["model_id"][0] == search.best_model_id
    assert search.stack_model_id in set(board["model_id"])
    registration = search.registration or {}
    assert registration["status"] == "registered" and registration["model_id"] == best.id
    candidate = client.model(f"{name}@candidate")
    assert (candidate.id, candidate.version) == (best.id, 1)
    jobs = search.jobs()
    assert jobs.total == 4 and {job.status for job in jobs} == {"succeeded"}


def test_searches_are_listed_and_read_back_by_id(client: Client, churn: Dataset) -> None:
    started = client.search(churn, target="churned", candidates=["decision_tree"], folds=2)
    started.wait(timeout=120)

    listed = next(s for s in client.searches(status="succeeded", limit=500) if s.id == started.id)
    again = client.search_by_id(started.id)

    assert "leaderboard" not in listed.info  # a listing's items: read on first use
    assert listed.best_model.id == again.best_model.id == started.best_model_id
    assert len(listed.leaderboard) == 1 == again.n_models
    assert repr(again).startswith(f"<Search {started.id} succeeded random roc_auc")


def test_without_pandas_the_leaderboard_is_a_list_of_dicts(
    client: Client, churn: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = client.search(
        churn,
        target="churned",
        strategy="grid",
        candidates=[{"method": "decision_tree", "params": {"max_depth": [1, 3]}}],
        metric="accuracy",
        folds=2,
    ).wait(timeout=120)
    monkeypatch.setitem(sys.modules, "pandas", None)

    board = search.leaderboard

    assert isinstance(board, list) and len(board) == 2
    assert sorted(row["params"]["max_depth"] for row in board) == [1, 3]
    assert set(board[0]) >= {"rank", "model_id", "accuracy", "accuracy_std", "kind", "job_id"}


def test_halving_ranks_its_last_rung_first(client: Client, churn: Dataset) -> None:
    search = client.search(
        churn,
        target="churned",
        strategy="halving",
        candidates={"decision_tree": {"max_depth": {"int": [1, 6]}}},
        max_models=3,
        folds=2,
        seed=0,
    ).wait(timeout=120)

    board = search.leaderboard
    assert search.planned == sum(rung["candidates"] for rung in search.info["plan"]["rungs"])
    assert board["iter"][0] == board["iter"].max() >= 1
    assert board["n_resources"].isna()[0]  # the last rung trains on every row


def test_auto_chooses_the_methods(client: Client, churn: Dataset) -> None:
    search = client.search(churn, target="churned", auto=True, max_models=2, folds=2, seed=0)
    search.wait(timeout=120)

    assert search.info["auto"] is True and search.n_models == 2
    assert {c["method"] for c in search.info["candidates"]} >= {"xgboost", "random_forest"}


def test_a_search_whose_candidates_all_fail_raises_with_their_reason(client: Client) -> None:
    records = [{"x": float(i), "y": "a" if i == 0 else "b"} for i in range(10)]
    dataset = client.upload(records, name="search-one-class-fold")
    search = client.search(dataset, target="y", candidates=["decision_tree"], folds=2)

    with pytest.raises(SearchFailedError, match="one_class") as failure:
        search.wait(timeout=60)

    assert failure.value.search_id == search.id and search.status == "failed"


def test_bad_spaces_are_refused_before_anything_runs(client: Client, churn: Dataset) -> None:
    with pytest.raises(ValidationError, match="n_trees") as unknown:
        client.search(churn, target="churned", candidates={"random_forest": {"n_trees": [5]}})
    assert unknown.value.errors[0]["loc"] == ["body", "candidates", 0, "params", "n_trees"]
    with pytest.raises(ValidationError, match="grid needs lists"):
        client.search(
            churn,
            target="churned",
            strategy="grid",
            candidates={"decision_tree": {"max_depth": {"int": [1, 6]}}},
        )
    with pytest.raises(TypeError, match="mapping of methods"):
        client.search(churn, target="churned", candidates="decision_tree")  # type: ignore[arg-type]


def test_cancel_keeps_what_finished_and_a_second_cancel_is_a_conflict(
    client: Client, churn: Dataset
) -> None:
    search = client.search(
        churn,
        target="churned",
        candidates=[{"method": LONG_FIT["method"], "params": LONG_FIT["params"]}],
        max_models=1,
        folds=2,
    )
    with pytest.raises(TimeoutError, match="still running"):
        search.wait(timeout=0.3)

    search.cancel()
    assert search.wait(timeout=60).status == "cancelled"  # returned, not raised

    with pytest.raises(ConflictError, match="already ended"):
        search.cancel()
    with pytest.raises(JobCancelledError):  # its running candidate stops within seconds
        search.jobs()[0].wait(timeout=60)


WAITER = """
import sys
import tqdm.auto  # imported by the progress bar; here, so a SIGINT cannot land mid-import
from coppice import Client

search = Client(sys.argv[1]).search(
    sys.argv[2], target="churned", candidates=[eval(sys.argv[3])], max_models=1, folds=2
)
print(search.id, flush=True)
search.wait(progress=True)
"""


def test_ctrl_c_while_waiting_cancels_the_search_on_the_server(
    client: Client, server_url: str, churn: Dataset
) -> None:
    search_id, err = interrupt_waiter(
        WAITER,
        [server_url, churn.id, repr(LONG_FIT)],
        lambda search: _wait_for_a_running_candidate(client, search),
    )

    assert "KeyboardInterrupt" in err and f"cancelling search {search_id}" in err, err
    assert "0/1 candidates" in err  # the bar showed the candidates
    search = client.search_by_id(search_id)
    for _ in range(300):
        if search.done:
            break
        time.sleep(0.1)
        search.refresh()
    assert search.status == "cancelled", search.info


def _wait_for_a_running_candidate(client: Client, search_id: str) -> None:
    deadline = time.monotonic() + 60
    while not client.jobs(search_id=search_id, status="running").total:
        assert time.monotonic() < deadline, client.search_by_id(search_id).info
        time.sleep(0.1)
