"""NVIDIA's ``tritonclient.http``, unmodified and with its defaults, against a real server.

One ``coppice serve`` process (uvicorn) runs for the module on a temporary SQLite data dir into
which two models were trained beforehand; the client speaks the binary tensor extension by
default, JSON when told, gzip when asked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.inference.helpers import RECORDS, matrix_rows
from tests.service.models.helpers import Service

httpclient = pytest.importorskip("tritonclient.http")
triton_utils = pytest.importorskip("tritonclient.utils")


@dataclass(frozen=True)
class Server:
    url: str  # host:port, as tritonclient wants it
    classifier: str
    regressor: str

    def v1_predict(self, model_id: str, **body: Any) -> dict[str, Any]:
        response = httpx.post(f"http://{self.url}/v1/models/{model_id}/predict", json=body)
        assert response.status_code == 200, response.text
        return dict(response.json())


async def _train(settings: Settings) -> tuple[str, str]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            svc = Service(client=client, app=app, settings=settings)
            classifier = await svc.train("random_forest", target="species")
            regressor = await svc.train("gradient_boosting", target="amount")
    return classifier, regressor


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()
        # Refused connections are expected until uvicorn has bound the port.
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"http://{url}/v2/health/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"the server did not become ready:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, migrated_sqlite_template: Path
) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("triton") / "data"
    data_dir.mkdir()
    shutil.copyfile(migrated_sqlite_template, data_dir / "coppice.db")
    settings = Settings(data_dir=data_dir, database_url=None, embedded_worker=False)
    classifier, regressor = anyio.run(_train, settings)

    port = _free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
    env |= {"COPPICE_DATA_DIR": str(data_dir), "COPPICE_EMBEDDED_WORKER": "false"}
    log_path = data_dir.parent / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"127.0.0.1:{port}"
            _wait_until_ready(url, process, log_path)
            yield Server(url=url, classifier=classifier, regressor=regressor)
        finally:
            process.terminate()
            process.wait(timeout=15)


@pytest.fixture
def client(server: Server) -> Iterator[Any]:
    with httpclient.InferenceServerClient(url=server.url) as triton:
        yield triton


def _matrix(dtype: str = "float64") -> np.ndarray:
    rows = matrix_rows(RECORDS)
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=dtype)


def test_health_and_metadata(server: Server, client: Any) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready(server.classifier)
    assert client.is_model_ready(server.classifier, model_version="1")
    assert not client.is_model_ready("no-such-model")

    metadata = client.get_server_metadata()
    model = client.get_model_metadata(server.classifier)

    assert metadata["name"] == "coppice"
    assert "binary_tensor_data" in metadata["extensions"]
    assert model["name"] == server.classifier
    assert model["inputs"][0]["shape"] == [-1, 3]
    assert [o["name"] for o in model["outputs"]] == ["predictions", "probabilities"]


def test_infer_with_the_clients_defaults_equals_v1(server: Server, client: Any) -> None:
    expected = server.v1_predict(server.classifier, records=RECORDS, return_proba=True)
    X = _matrix()
    tensor = httpclient.InferInput("input", list(X.shape), "FP64")
    tensor.set_data_from_numpy(X)  # binary by default

    result = client.infer(server.classifier, [tensor], request_id="abc")

    labels = result.as_numpy("predictions")
    assert [label.decode() for label in labels] == expected["predictions"]
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected["probabilities"])
    response = result.get_response()
    assert response["id"] == "abc"
    assert response["model_version"] == "1"


def test_json_tensors_feature_inputs_and_classification(server: Server, client: Any) -> None:
    expected = server.v1_predict(server.classifier, records=RECORDS, return_proba=True)
    n = len(RECORDS)
    colour = httpclient.InferInput("colour", [n], "BYTES")
    colour.set_data_from_numpy(np.array([r.get("colour") or "" for r in RECORDS], dtype=object))
    x = httpclient.InferInput("x", [n, 1], "FP32")
    x.set_data_from_numpy(
        np.array([[np.nan if r.get("x") is None else r["x"]] for r in RECORDS], dtype=np.float32),
        binary_data=False,
    )
    z = httpclient.InferInput("z", [n], "FP64")
    z.set_data_from_numpy(np.array([np.nan if r.get("z") is None else r["z"] for r in RECORDS]))
    outputs = [
        httpclient.InferRequestedOutput("predictions", binary_data=False),
        httpclient.InferRequestedOutput("probabilities", class_count=1),
    ]

    result = client.infer(server.classifier, [colour, x, z], outputs=outputs, model_version="1")

    assert list(result.as_numpy("predictions")) == expected["predictions"]
    top = [entry.decode().split(":") for entry in result.as_numpy("probabilities").ravel()]
    assert [label for _, _, label in top] == expected["predictions"]
    np.testing.assert_allclose(
        [float(score) for score, _, _ in top], np.max(expected["probabilities"], axis=1), atol=1e-6
    )


def test_regression_with_compression(server: Server, client: Any) -> None:
    expected = server.v1_predict(server.regressor, records=RECORDS)
    X = _matrix("float32")
    tensor = httpclient.InferInput("input", list(X.shape), "FP32")
    tensor.set_data_from_numpy(X)

    result = client.infer(
        server.regressor,
        [tensor],
        request_compression_algorithm="gzip",
        response_compression_algorithm="gzip",
    )

    # FP32 inputs are widened to float64 exactly; the same rows, the same predictions.
    np.testing.assert_allclose(result.as_numpy("predictions"), expected["predictions"], rtol=1e-6)


def test_errors_reach_the_client_as_exceptions(server: Server, client: Any) -> None:
    X = _matrix()
    wrong = httpclient.InferInput("input", [X.shape[0], 2], "FP64")
    wrong.set_data_from_numpy(X[:, :2])
    good = httpclient.InferInput("input", list(X.shape), "FP64")
    good.set_data_from_numpy(X)

    with pytest.raises(triton_utils.InferenceServerException) as shape:
        client.infer(server.classifier, [wrong])
    with pytest.raises(triton_utils.InferenceServerException) as unknown:
        client.infer("no-such-model", [good])
    with pytest.raises(triton_utils.InferenceServerException) as proba:
        client.infer(
            server.regressor, [good], outputs=[httpclient.InferRequestedOutput("probabilities")]
        )

    assert shape.value.status() == "400"
    assert "the model takes [n, 3]" in shape.value.message()
    assert unknown.value.status() == "404"
    assert proba.value.status() == "400"
    assert "no class probabilities" in proba.value.message()
