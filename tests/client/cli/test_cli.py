"""Every client verb of the ``coppice`` command against a real server: human output, ``--json``,
exit codes, ``--help``; ``train --wait`` interrupted with Ctrl-C cancels its job."""

from __future__ import annotations

import argparse
import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coppice import Client
from coppice.cli import SERVER_COMMANDS, build_parser, main
from coppice.cli.exits import (
    CONFLICT,
    INTERRUPTED,
    INVALID,
    JOB_CANCELLED,
    JOB_FAILED,
    NOT_FOUND,
    UNREACHABLE,
)
from tests.client.cli.runner import Cli
from tests.client.helpers import (
    LONG_FIT,
    churn_frame,
    interruptible,
    wait_until_running,
    write_csv,
)
from tests.e2e.processes import free_port


@pytest.fixture(scope="module")
def churn_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_csv(tmp_path_factory.mktemp("cli") / "churn.csv", churn_frame(150))


def test_datasets_upload_list_and_show(cli: Cli, churn_csv: Path) -> None:
    out, _ = cli("datasets", "upload", str(churn_csv), "--name", "cli-churn")
    assert "cli-churn" in out and "categorical" in out and "150" in out

    uploaded = cli.json("datasets", "upload", str(churn_csv), "--categorical", "age")
    assert {c["name"]: c["kind"] for c in uploaded["columns"]}["age"] == "categorical"

    listing = cli.json("datasets", "list", "--limit", "1")
    assert listing["items"][0]["id"] == uploaded["id"] and listing["total"] >= 2
    out, err = cli("datasets", "list", "--limit", "1")
    assert out.splitlines()[0].split() == ["ID", "NAME", "ROWS", "COLUMNS", "CREATED"]
    assert uploaded["id"] in out and "--offset 1 for more" in err

    out, _ = cli("datasets", "show", uploaded["id"])
    assert "monthly" in out and "numeric" in out


def test_train_wait_jobs_models_predict_importance(
    cli: Cli, churn_csv: Path, tmp_path: Path
) -> None:
    dataset = cli.json("datasets", "upload", str(churn_csv))
    # --param values are JSON when they read as JSON: 10 is a number, "sqrt" stays text.
    train = ["train", "--dataset", dataset["id"], "--target", "churned"]
    train += ["--method", "random_forest", "--param", "n_estimators=10"]
    out, err = cli(*train, "--param", "max_features=sqrt", "--holdout", "0.25", "--wait")
    assert "random_forest" in out and "accuracy" in out and "VALIDATION" in out
    assert "succeeded" in err  # the progress bar, on stderr

    model = cli.json("models", "list", "--method", "random_forest")["items"][0]
    assert model["params"]["max_features"] == "sqrt" and model["params"]["n_estimators"] == 10
    job = cli.json("jobs", "show", model["job_id"])
    assert job["status"] == "succeeded" and job["model_id"] == model["id"]
    out, _ = cli("jobs", "list", "--status", "succeeded")
    assert model["job_id"] in out and "100%" in out
    out, _ = cli("models", "show", model["id"])
    assert "features    age, plan, monthly" in out and "log_loss" in out
    assert "importance  impurity, permutation, oob_permutation, shap" in out
    assert cli.json("models", "show", model["id"])["id"] == model["id"]

    out, _ = cli("importance", model["id"], "--kind", "shap")
    assert out.splitlines()[0].split() == ["FEATURE", "IMPORTANCE", "STD"]
    assert cli.json("importance", model["id"])["kind"] == "impurity"

    _, err = cli("predict", model["id"], str(churn_csv), "--proba")
    scored = tmp_path / "scored.csv"
    cli("predict", model["id"], str(churn_csv), "--proba", "--batch", "40", "-o", str(scored))
    rows = list(csv.DictReader(io.StringIO(scored.read_text())))
    assert "leaving out the target column 'churned'" in err and "150 rows predicted" in err
    assert len(rows) == 150 and set(rows[0]) == {"prediction", "proba_no", "proba_yes"}
    assert {row["prediction"] for row in rows} <= {"no", "yes"}
    out, _ = cli("predict", model["id"], str(churn_csv), "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["prediction"] for line in lines] == [row["prediction"] for row in rows]


def test_methods_and_a_failed_training(cli: Cli) -> None:
    out, _ = cli("methods")
    assert out.splitlines()[0].split()[:2] == ["METHOD", "TASKS"] and "xgboost" in out
    assert "random_forest" in {m["name"] for m in cli.json("methods")}

    records = [{"x": float(i), "y": "a" if i == 0 else "b"} for i in range(10)]
    dataset = Client(cli.url).upload(records, name="cli-one-class-fold")
    args = ["train", "--dataset", dataset.id, "--target", "y", "--method", "decision_tree"]
    _, err = cli(*args, "--folds", "2", "--wait", "--no-progress", code=JOB_FAILED)
    assert "one_class" in err


def test_train_without_wait_then_cancel(cli: Cli) -> None:
    dataset = Client(cli.url).upload(churn_frame(100), name="cli-cancel")
    params = [f"{key}={json.dumps(value)}" for key, value in LONG_FIT["params"].items()]
    args = ["train", "--dataset", dataset.id, "--target", "churned"]
    args += ["--method", str(LONG_FIT["method"])]
    for param in params:
        args += ["--param", param]
    job = cli.json(*args)
    assert job["status"] in ("queued", "running")

    out, _ = cli("jobs", "cancel", job["id"])
    assert "cancel" in out
    cli("jobs", "wait", job["id"], "--no-progress", code=JOB_CANCELLED)
    _, err = cli("jobs", "cancel", job["id"], code=CONFLICT)
    assert "already ended" in err


def test_exit_codes_carry_the_servers_detail(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, err = cli("models", "show", "nope", code=NOT_FOUND)
    assert "nope" in err
    _, err = cli("jobs", "show", "nope", code=NOT_FOUND)
    dataset = Client(cli.url).upload([{"x": 1.0, "y": "a"}, {"x": 2.0, "y": "b"}], name="e")
    args = ["train", "--dataset", dataset.id, "--target", "y", "--method", "random_forest"]
    _, err = cli(*args, "--param", "n_trees=3", code=INVALID)
    assert "n_trees" in err
    _, err = cli("datasets", "upload", str(tmp_path / "missing.csv"), code=INVALID)
    assert "missing.csv" in err
    monkeypatch.setenv("COPPICE_MAX_RETRIES", "0")
    assert main(["datasets", "list", "--url", f"http://127.0.0.1:{free_port()}"]) == UNREACHABLE


# service.cli's verbs (serve, worker, migrate, store), with help of their own.
SERVER_VERBS = set(SERVER_COMMANDS)


def client_verbs(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every leaf command of the parser (``datasets upload``, ``train``, ...), walked."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [path]
    return [
        verb
        for name, sub in subs[0].choices.items()
        if name not in SERVER_VERBS
        for verb in client_verbs(sub, (*path, name))
    ]


def test_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = client_verbs(build_parser())
    assert len(verbs) > 20 and ("datasets", "upload") in verbs and ("predict",) in verbs
    for verb in verbs:
        with pytest.raises(SystemExit) as done:
            main([*verb, "--help"])
        assert done.value.code == 0, verb
        out = capsys.readouterr().out
        assert "examples:" in out and f"coppice {' '.join(verb)}" in out, verb
        assert "exit codes:" in out and "--json" in out, verb
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(verb in out for verb in ("serve", "worker", "migrate", "datasets", "predict"))


def test_ctrl_c_during_train_wait_cancels_the_job(server_url: str) -> None:
    client = Client(server_url)
    dataset = client.upload(churn_frame(1000), name="cli-interrupted")
    before = {job.id for job in client.jobs(limit=1000)}
    params = [f"--param={key}={json.dumps(value)}" for key, value in LONG_FIT["params"].items()]
    command = [sys.executable, "-m", "coppice.cli", "train", "--url", server_url, "--wait"]
    command += ["--dataset", dataset.id, "--target", "churned"]
    command += ["--method", str(LONG_FIT["method"]), *params]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        job_id = _new_job(client, before)
        wait_until_running(client, job_id)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()

    assert process.returncode == INTERRUPTED, err
    assert f"cancelling job {job_id}" in err
    assert client.job(job_id).refresh(wait=30).status == "cancelled"


def _new_job(client: Client, before: set[str]) -> str:
    for _ in range(300):
        new = [job.id for job in client.jobs(limit=1000) if job.id not in before]
        if new:
            return new[0]
        time.sleep(0.1)
    raise AssertionError("the command did not start a job")


def test_batch_start_wait_and_download(cli: Cli, churn_csv: Path, tmp_path: Path) -> None:
    dataset = cli.json("datasets", "upload", str(churn_csv), "--name", "cli-batch")
    job = cli.json(
        "train",
        "--dataset",
        dataset["id"],
        "--target",
        "churned",
        "--method",
        "decision_tree",
        "--wait",
        "--no-progress",
    )
    scored = tmp_path / "scored.csv"

    out, _ = cli(
        "batch",
        "start",
        job["id"],
        dataset["id"],
        "--keep",
        "age",
        "--proba",
        "--wait",
        "--no-progress",
        "--out",
        str(scored),
    )

    assert "succeeded" in out and "metric accuracy" in out
    rows = list(csv.DictReader(scored.open()))
    assert len(rows) == 150 and list(rows[0]) == ["age", "prediction", "proba_no", "proba_yes"]
    listing = cli.json("batch", "list", "--model", job["id"])
    assert listing["total"] == 1
    batch_id = listing["items"][0]["id"]
    assert cli.json("batch", "show", batch_id)["output_dataset_id"]
    cli("batch", "cancel", batch_id, code=CONFLICT)
    cli("batch", "start", job["id"], "nope", code=NOT_FOUND)
