"""Which calls the client repeats after a ``503``, and how long it waits between tries.

A real server answers ``503`` only while its database is out of reach, which
``tests/service`` brings about; here a stand-in answers through ``httpx.MockTransport``, so the
client's side alone is held: reads, predictions and cancels are repeated, uploads and
training requests never, and every problem document becomes its status family's exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from coppice import (
    Client,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    ServerError,
    ServiceUnavailableError,
    ValidationError,
    _http,
)

URL = "http://coppice.test"
UNAVAILABLE = {"type": "about:blank", "title": "Service Unavailable", "status": 503}


def problem(status: int, detail: str) -> httpx.Response:
    body = {"type": "about:blank", "title": "refused", "status": status, "detail": detail}
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json"})


class Stub:
    """Answers ``503`` ``busy`` times, then ``answer``; records each request and each wait."""

    def __init__(self, busy: int, answer: Callable[[httpx.Request], httpx.Response]):
        self.busy = busy
        self.answer = answer
        self.requests: list[str] = []
        self.waits: list[float] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        if len(self.requests) <= self.busy:
            headers = {"Retry-After": "0.25"} if len(self.requests) == 1 else {}
            return httpx.Response(503, json=UNAVAILABLE | {"detail": "not ready"}, headers=headers)
        return self.answer(request)


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[Client, Stub]]:
    def make(
        busy: int, answer: Callable[[httpx.Request], httpx.Response], retries: int = 3
    ) -> tuple[Client, Stub]:
        stub = Stub(busy, answer)
        monkeypatch.setattr(_http.time, "sleep", stub.waits.append)
        client = Client(URL, max_retries=retries)
        transport = client._transport
        transport._http = httpx.Client(
            base_url=URL, transport=httpx.MockTransport(stub.handle), timeout=5
        )
        return client, stub

    return make


def listing(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"items": [], "total": 0, "limit": 50, "offset": 0})


def test_a_read_is_repeated_after_503s_waiting_retry_after_then_doubling(
    stubbed: Callable[..., tuple[Client, Stub]],
) -> None:
    client, stub = stubbed(busy=3, answer=listing)

    assert client.datasets().total == 0

    assert stub.requests == ["GET /v1/datasets"] * 4
    # The first 503 named its Retry-After; the others fall back to 0.5 s, doubling.
    assert stub.waits == [0.25, 1.0, 2.0]


def test_a_read_gives_up_after_max_retries_with_the_servers_detail(
    stubbed: Callable[..., tuple[Client, Stub]],
) -> None:
    client, stub = stubbed(busy=10, answer=listing, retries=2)

    with pytest.raises(ServiceUnavailableError, match="not ready") as failure:
        client.datasets()

    assert failure.value.status == 503 and isinstance(failure.value, ServerError)
    assert len(stub.requests) == 3


def test_uploads_and_training_are_never_repeated(
    stubbed: Callable[..., tuple[Client, Stub]],
) -> None:
    client, stub = stubbed(busy=10, answer=listing)

    with pytest.raises(ServiceUnavailableError):
        client.upload([{"x": 1.0}])
    with pytest.raises(ServiceUnavailableError):
        client.train("some-dataset", target="y", method="random_forest")

    assert stub.requests == ["POST /v1/datasets", "POST /v1/jobs"]
    assert stub.waits == []


def test_a_prediction_is_repeated_a_post_the_client_vouches_for(
    stubbed: Callable[..., tuple[Client, Stub]],
) -> None:
    model: dict[str, Any] = {
        "id": "m1",
        "method": "random_forest",
        "task": "regression",
        "target": "y",
        "features": [{"name": "x", "kind": "numeric"}],
        "classes": None,
        "params": {},
        "metrics": {},
        "registered": [],
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=model)
        return httpx.Response(200, json={"model_id": "m1", "predictions": [1.5]})

    client, stub = stubbed(busy=0, answer=answer)
    loaded = client.model("m1")
    stub.busy = 3  # the model's read was the first request: the next two are refused

    assert loaded.predict([{"x": 2.0}]).tolist() == [1.5]
    assert stub.requests[1:] == ["POST /v1/models/m1/predict"] * 3


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (415, ValidationError),
        (422, ValidationError),
        (500, ServerError),
    ],
)
def test_each_status_family_is_its_class_and_is_not_repeated(
    stubbed: Callable[..., tuple[Client, Stub]], status: int, error: type[Exception]
) -> None:
    client, stub = stubbed(busy=0, answer=lambda _: problem(status, f"said {status}"))

    with pytest.raises(error, match=f"^said {status}$"):
        client.datasets()

    assert len(stub.requests) == 1
