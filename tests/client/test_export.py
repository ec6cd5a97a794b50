"""``model.export(...)`` and ``coppice models export``: the files the server makes, saved as
they came, and answering as the model does (docs/export.md)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coppice import Client, Model
from coppice.errors import ValidationError
from tests.client.cli.runner import Cli
from tests.client.helpers import churn_frame

ort = pytest.importorskip("onnxruntime")


def onnx_inputs(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        "age": rows[["age"]].to_numpy(dtype=np.float64),
        "plan": rows[["plan"]].fillna("").to_numpy(dtype=object),
        "monthly": rows[["monthly"]].to_numpy(dtype=np.float64),
    }


def test_export_onnx_answers_as_the_model(churn_model: Model, tmp_path: Path) -> None:
    rows = churn_frame(30, seed=5).drop(columns="churned")
    rows.loc[2, "plan"] = "enterprise"  # never seen in training
    rows.loc[3, "age"] = np.nan
    path = tmp_path / "churn.onnx"
    data = churn_model.export("onnx", path)
    assert path.read_bytes() == data
    label, probabilities = ort.InferenceSession(data).run(None, onnx_inputs(rows))
    assert label.tolist() == list(churn_model.predict(rows))
    expected = churn_model.predict_proba(rows)[churn_model.classes].to_numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-9, atol=0)


def test_export_triton_is_a_model_repository(churn_model: Model) -> None:
    archive = zipfile.ZipFile(io.BytesIO(churn_model.export("triton")))
    assert sorted(archive.namelist()) == [
        f"coppice-{churn_model.id}/1/model.onnx",
        f"coppice-{churn_model.id}/config.pbtxt",
    ]


def test_a_method_that_does_not_export_raises_naming_those_that_do(
    client: Client, churn_model: Model
) -> None:
    knn = client.train(
        churn_model.info["dataset_id"], target="churned", method="k_neighbors", seed=0
    ).wait(timeout=120)
    with pytest.raises(ValidationError) as raised:
        knn.export("onnx")
    assert "random_forest" in str(raised.value)


def test_cli_models_export(
    server_url: str,
    churn_model: Model,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = Cli(server_url, capsys)
    target = tmp_path / "model.zip"
    out, _ = cli("models", "export", churn_model.id, "--format", "triton", "-o", str(target))
    assert str(target) in out and "triton" in out
    assert zipfile.is_zipfile(target)
    monkeypatch.chdir(tmp_path)
    answer = cli.json("models", "export", churn_model.id)
    assert answer["format"] == "onnx"
    assert (tmp_path / f"coppice-{churn_model.id}.onnx").stat().st_size == answer["bytes"]
