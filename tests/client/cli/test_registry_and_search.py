"""``coppice registry ...`` and ``coppice search ...`` against a real server: tables for people,
``--json`` for scripts, the exit codes of the other verbs, and ``--help`` with examples."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from coppice import Client, Model
from coppice.cli import main
from coppice.cli.exits import CONFLICT, INVALID, JOB_CANCELLED, JOB_FAILED, NOT_FOUND
from tests.client.cli.runner import Cli
from tests.client.helpers import LONG_FIT, churn_frame


@pytest.fixture(scope="module")
def dataset_id(server_url: str) -> str:
    return Client(server_url).upload(churn_frame(200), name="cli-search").id


def test_registry_register_alias_show_history_and_list(cli: Cli, churn_model: Model) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"

    out, _ = cli("registry", "register", churn_model.id, name, "--alias", "staging")
    assert f"name     {name}" in out and "version  1" in out and "aliases  staging" in out
    second = cli.json("registry", "register", f"{name}@staging", name, "--description", "x")
    assert (second["version"], second["model_id"]) == (2, churn_model.id)

    out, _ = cli("registry", "alias", name, "production", "2")
    assert out.strip() == f"{name}@production: (new) -> version 2 ({churn_model.id})"
    moved = cli.json("registry", "alias", name, "production", "1")
    assert (moved["version"], moved["previous_version"]) == (1, 2)
    out, _ = cli("registry", "unalias", name, "staging")
    assert "removed" in out

    out, _ = cli("registry", "show", name)
    assert "aliases      production=1" in out
    assert out.splitlines()[6].split() == ["VERSION", "MODEL", "ALIASES", "CREATED", "BY"]
    assert cli.json("registry", "show", name)["latest_version"] == 2
    out, _ = cli("registry", "history", name)
    lines = out.splitlines()
    assert lines[0].split() == ["MOVED", "ALIAS", "FROM", "TO", "BY"]
    assert lines[1].split()[2:] == ["staging", "1", "(removed)", "-"]
    assert cli.json("registry", "history", name, "--limit", "2")["total"] == 4
    listed = cli.json("registry", "list", "--limit", "500")
    assert name in {item["name"] for item in listed["items"]}
    out, _ = cli("registry", "list", "--limit", "500")
    assert out.splitlines()[0].split()[:4] == ["NAME", "VERSIONS", "LATEST", "ALIASES"]

    out, _ = cli("models", "show", f"{name}@production")
    assert f"registered  {name}@1 ({name}@production)" in out


def test_registry_errors_have_the_usual_exit_codes(cli: Cli, churn_model: Model) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    _, err = cli("registry", "show", missing, code=NOT_FOUND)
    assert f"coppice: There is no registered model named '{missing}'" in err
    cli("registry", "history", missing, code=NOT_FOUND)
    name = f"cli-{uuid.uuid4().hex[:8]}"
    cli("registry", "register", churn_model.id, name, "--alias", "production")
    _, err = cli("registry", "alias", name, "production", "7", code=NOT_FOUND)
    assert "7" in err
    _, err = cli("registry", "alias", name, "v2", "1", code=INVALID)  # reads as a version
    assert "v2" in err
    cli("models", "show", f"{name}@nope", code=NOT_FOUND)
    _, err = cli("registry", "register", churn_model.id, "bad name", code=INVALID)
    assert "name" in err
    cli("registry", "unalias", name, "production")
    _, err = cli("registry", "unalias", name, "production", code=NOT_FOUND)
    assert "no alias 'production'" in err


def test_search_start_wait_then_list_show_and_leaderboard(cli: Cli, dataset_id: str) -> None:
    start = ["search", "start", "--dataset", dataset_id, "--target", "churned"]
    start += ["--method", "decision_tree", "--method", "logistic_regression"]
    out, err = cli(*start, "--budget-models", "2", "--folds", "2", "--seed", "1", "--wait")
    assert "candidates" in err and "succeeded: 2 ranked" in err  # the progress bar
    assert "status      succeeded" in out and "metric      roc_auc (maximize)" in out
    header = next(line for line in out.splitlines() if line.startswith("RANK"))
    assert header.split() == [
        "RANK",
        "MODEL",
        "METHOD",
        "ROC_AUC",
        "STD",
        "KIND",
        "FIT_S",
        "PARAMS",
    ]

    space = json.dumps({"decision_tree": {"max_depth": [1, 2]}})
    started = cli.json(*start[:6], "--candidates", space, "--strategy", "grid", "--folds", "2")
    assert started["status"] == "running" and started["strategy"] == "grid"
    assert started["candidates"] == [{"method": "decision_tree", "params": {"max_depth": [1, 2]}}]
    Client(cli.url).search_by_id(started["id"]).wait(timeout=120)

    listed = cli.json("search", "list", "--status", "succeeded", "--limit", "500")
    assert started["id"] in {item["id"] for item in listed["items"]}
    out, _ = cli("search", "list", "--limit", "500")
    assert out.splitlines()[0].split()[:3] == ["ID", "STATUS", "PROGRESS"] and started["id"] in out
    shown = cli.json("search", "show", started["id"])
    assert shown["n_models"] == 2 and len(shown["leaderboard"]) == 2
    out, _ = cli("search", "leaderboard", started["id"])
    assert out.count('{"max_depth":') == 2 and out.splitlines()[1].split()[0] == "1"
    board = cli.json("search", "leaderboard", started["id"])
    assert [row["rank"] for row in board] == [1, 2]


def test_search_failures_cancels_and_refusals_have_exit_codes(
    cli: Cli, dataset_id: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    records = [{"x": float(i), "y": "a" if i == 0 else "b"} for i in range(10)]
    one_class = Client(cli.url).upload(records, name="cli-search-one-class-fold")
    start = ["search", "start", "--dataset", one_class.id, "--target", "y"]
    _, err = cli(*start, "--method", "decision_tree", "--folds", "2", "--wait", code=JOB_FAILED)
    assert "failed" in err and "one_class" in err

    long_fit = tmp_path_factory.mktemp("cli-search") / "long.json"
    long_fit.write_text(json.dumps([LONG_FIT]))
    start = ["search", "start", "--dataset", dataset_id, "--target", "churned", "--folds", "2"]
    running = cli.json(*start, "--candidates", f"@{long_fit}", "--max-models", "1")
    out, _ = cli("search", "cancel", running["id"])
    assert "status      cancelled" in out
    _, err = cli("search", "cancel", running["id"], code=CONFLICT)
    assert "already ended" in err

    _, err = cli(*start, "--candidates", '{"random_forest": {"n_trees": [3]}}', code=INVALID)
    assert "n_trees" in err
    _, err = cli(*start, "--candidates", "{not json", code=INVALID)
    assert "--candidates is not JSON" in err
    cli("search", "show", "nope", code=NOT_FOUND)


def test_a_search_cancelled_while_start_waits_is_shown_then_exits_10(
    cli: Cli, dataset_id: str
) -> None:
    client = Client(cli.url)
    before = {search.id for search in client.searches(limit=500)}
    canceller = threading.Thread(target=_cancel_the_new_search, args=(client, before))
    canceller.start()
    start = ["search", "start", "--dataset", dataset_id, "--target", "churned", "--folds", "2"]
    candidates = json.dumps([LONG_FIT])
    try:
        out, _ = cli(*start, "--candidates", candidates, "--wait", code=JOB_CANCELLED)
    finally:
        canceller.join(timeout=60)
    assert "status      cancelled" in out


def _cancel_the_new_search(client: Client, before: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [s for s in client.searches(status="running", limit=500) if s.id not in before]
        if new:
            new[0].cancel()
            return
        time.sleep(0.1)


def test_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = [["registry", "register"], ["registry", "history"], ["search", "start"]]
    verbs += [["search", "leaderboard"]]
    for verb in verbs:
        with pytest.raises(SystemExit) as done:
            main([*verb, "--help"])
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert "examples:" in out and f"coppice {' '.join(verb)}" in out and "exit codes:" in out
    with pytest.raises(SystemExit):
        main(["search", "start", "--help"])
    out = capsys.readouterr().out
    assert "--max-models MAX_MODELS, --budget-models MAX_MODELS" in out
