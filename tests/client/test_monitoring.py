"""``model.predict(ids=...)``, ``model.feedback`` and ``model.monitoring()``, and ``coppice
models monitor``, against a real server (docs/monitoring.md)."""

from __future__ import annotations

import pytest

from coppice import Model
from tests.client.cli.runner import Cli
from tests.client.helpers import churn_frame


def test_feedback_by_id_and_the_report(churn_model: Model) -> None:
    frame = churn_frame(20, seed=11)
    rows, actual = frame.drop(columns="churned"), frame["churned"]
    ids = [f"order-{i}" for i in range(len(rows))]
    predicted = churn_model.predict(rows, ids=ids)

    answer = churn_model.feedback([*ids, "order-x"], [*actual.astype(str), "yes"])

    assert answer["matched"] == 20 and answer["unknown_ids"] == ["order-x"]
    report = churn_model.monitoring()
    assert report["model_id"] == churn_model.id and report["n_predictions"] >= 20
    assert [f["name"] for f in report["features"]] == churn_model.features
    assert report["performance"]["n_labelled"] == 20
    expected = float((predicted.astype(str) == actual.astype(str)).mean())
    assert report["performance"]["accuracy"] == pytest.approx(expected)


def test_cli_models_monitor(
    server_url: str, churn_model: Model, capsys: pytest.CaptureFixture[str]
) -> None:
    churn_model.predict(churn_frame(10, seed=12).drop(columns="churned"))
    cli = Cli(server_url, capsys)
    out, _ = cli("models", "monitor", churn_model.id)
    assert "PSI" in out and "(prediction)" in out
    for name in churn_model.features:
        assert name in out
    report = cli.json("models", "monitor", churn_model.id, "--since", "2000-01-01T00:00:00Z")
    assert report["window"]["since"].startswith("2000-01-01")
