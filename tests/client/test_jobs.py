"""``Job`` against a real server: waiting with progress, failures, cancelling, and Ctrl-C
while waiting, which cancels the job on the server."""

from __future__ import annotations

import sys

import pytest

from coppice import Client, ConflictError, JobCancelledError, JobFailedError, Model
from tests.client.helpers import LONG_FIT, churn_frame, interrupt_waiter, wait_until_running


def test_train_waits_with_a_progress_bar_and_returns_the_model(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = client.upload(churn_frame(120), name="progress")
    job = client.train(
        dataset,
        target="churned",
        method="gradient_boosting",
        params={"n_estimators": 15, "max_depth": 2},
        name="progress-job",
    )
    assert job.status in ("queued", "running", "succeeded")

    model = job.wait(progress=True, timeout=120)

    bar = capsys.readouterr().err
    assert "succeeded" in bar and "100%" in bar, bar
    assert isinstance(model, Model) and model.id == job.model_id
    assert model.method == "gradient_boosting" and model.classes == ["no", "yes"]
    assert set(model.metrics) == {"train", "validation", "oob", "cv"}
    assert client.job(job.id).status == "succeeded"
    resources = client.job(job.id).resources
    assert resources is not None and resources["backend"] == "local"
    assert resources["peak_rss_bytes"] > 0 and resources["cpu_seconds"] > 0
    assert job.id in [j.id for j in client.jobs(status="succeeded")]
    assert model.id in [m.id for m in client.models(method="gradient_boosting")]


def test_a_failed_job_raises_with_the_servers_reason(client: Client) -> None:
    # One row of class "a": the fold that holds it trains on "b" alone, which the worker
    # (not the request's checks) finds.
    records = [{"x": float(i), "y": "a" if i == 0 else "b"} for i in range(10)]
    dataset = client.upload(records, name="one-class-fold")
    job = client.train(dataset, target="y", method="decision_tree", validation={"folds": 2})

    with pytest.raises(JobFailedError) as failure:
        job.wait(timeout=60)

    assert failure.value.code == "one_class"
    assert job.id in str(failure.value)


def test_cancel_a_job_then_cancelling_again_is_a_conflict(client: Client) -> None:
    dataset = client.upload(churn_frame(200), name="cancel")
    job = client.train(dataset, target="churned", **LONG_FIT)

    with pytest.raises(TimeoutError, match="still"):
        job.wait(timeout=0.3)
    job.cancel()
    with pytest.raises(JobCancelledError, match=job.id):
        job.wait(timeout=60)

    assert job.status == "cancelled"
    with pytest.raises(ConflictError, match="already ended"):
        job.cancel()


WAITER = """
import sys
import tqdm.auto  # imported by the progress bar; here, so a SIGINT cannot land mid-import
from coppice import Client

job = Client(sys.argv[1]).train(sys.argv[2], target="churned", **eval(sys.argv[3]))
print(job.id, flush=True)
job.wait(progress=True)
"""


def test_ctrl_c_while_waiting_cancels_the_job_on_the_server(
    client: Client, server_url: str
) -> None:
    dataset = client.upload(churn_frame(1000), name="interrupted")
    job_id, err = interrupt_waiter(
        WAITER,
        [server_url, dataset.id, repr(LONG_FIT)],
        lambda job: wait_until_running(client, job),
    )

    assert "KeyboardInterrupt" in err and f"cancelling job {job_id}" in err, err
    assert "running:" in err  # the bar showed the stage text
    job = client.job(job_id).refresh(wait=30)
    assert job.status == "cancelled", job.info


def test_without_tqdm_progress_is_printed_as_lines(
    client: Client, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` now fails
    dataset = client.upload(churn_frame(60), name="no-tqdm")
    job = client.train(dataset, target="churned", method="decision_tree")

    job.wait(progress=True, timeout=60)

    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"job {job.id[:8]} 100% succeeded: done", lines
