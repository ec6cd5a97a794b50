"""One real ``coppice serve`` for every test under tests/client, and small tables to train on.

Starting a server and its first fit process costs seconds, so the client's tests share one:
it starts with the first test that needs it and stops as soon as the run leaves this folder
(``pytest_runtest_teardown`` below), not at the end of the whole session, so it never idles
beside the rest of the suite. Tests keep their data small and their models to a few trees,
and never assume the server is empty.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from coppice import Client, Model
from tests.client.helpers import MAX_UPLOAD_BYTES, churn_frame
from tests.e2e.processes import serving

HERE = Path(__file__).resolve().parent


class SharedServer:
    """A ``serving`` context kept open across test modules until :meth:`stop`."""

    running: SharedServer | None = None

    def __init__(self, root: Path) -> None:
        self._stack = contextlib.ExitStack()
        self.url, _processes = self._stack.enter_context(
            serving(root, max_upload_bytes=str(MAX_UPLOAD_BYTES))
        )
        SharedServer.running = self

    def stop(self) -> None:
        self._stack.close()
        if SharedServer.running is self:
            SharedServer.running = None


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = SharedServer(tmp_path_factory.mktemp("client-server"))
    try:
        yield server.url
    finally:
        server.stop()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # The session fixture would outlive this folder: stop the server once the next test is
    # elsewhere. (Files named out of order on the command line, this folder's tests split
    # around others, would find it stopped; pytest's own order keeps a folder together.)
    if SharedServer.running is not None and (
        nextitem is None or HERE not in Path(nextitem.path).resolve().parents
    ):
        SharedServer.running.stop()


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as client:
        yield client


@pytest.fixture(scope="module")
def churn_model(server_url: str) -> Model:
    """A small forest trained once per module, with a holdout (so SHAP and permutation
    importances exist) and bootstrap (so OOB curves do)."""
    client = Client(server_url)
    dataset = client.upload(churn_frame(), name="churn")
    job = client.train(
        dataset,
        target="churned",
        method="random_forest",
        params={"n_estimators": 12, "max_depth": 5},
        validation={"holdout": 0.25},
        seed=1,
    )
    return job.wait(timeout=120)
