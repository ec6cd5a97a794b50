"""``Client`` against a real ``coppice serve``: uploads of every kind, listings, training,
progress, and the server's errors as exceptions carrying its detail."""

from __future__ import annotations

import ast
import copy
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coppice import (
    Client,
    ConnectionFailedError,
    NotFoundError,
    ValidationError,
)
from tests.e2e.processes import Processes, free_port


def test_list_show_and_delete_datasets(client: Client) -> None:
    dataset = client.upload([{"x": 1.0}, {"x": 2.0}], name="to-delete")

    page = client.datasets(limit=2)
    assert page.total >= 1 and len(page) <= 2
    assert page[0].id == dataset.id  # newest first
    assert client.dataset(dataset.id).columns[0]["name"] == "x"

    dataset.delete()
    with pytest.raises(NotFoundError, match=dataset.id):
        client.dataset(dataset.id)


def test_methods_lists_every_method_with_its_schema(client: Client) -> None:
    methods = {m["name"]: m for m in client.methods()}
    assert {"random_forest", "xgboost", "gradient_boosting"} <= set(methods)
    assert "n_estimators" in methods["random_forest"]["params_schema"]["properties"]


def test_errors_carry_the_servers_detail(client: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.model("no-such-model")
    assert missing.value.status == 404
    assert "no-such-model" in str(missing.value) and missing.value.detail == str(missing.value)

    dataset = client.upload([{"x": 1.0, "y": "a"}, {"x": 2.0, "y": "b"}], name="bad-params")
    with pytest.raises(ValidationError) as invalid:
        client.train(dataset, target="y", method="random_forest", params={"n_trees": 3})
    assert invalid.value.status == 422
    assert "n_trees" in str(invalid.value)
    assert invalid.value.problem["status"] == 422


def test_ids_and_names_are_one_path_segment_each(client: Client) -> None:
    # Every object escapes its own address in one place (coppice/_resource.py): a "?" or "#"
    # typed into an id or a name is part of it, not a query or a fragment, so the server
    # names exactly what was asked for.
    for odd in ("no-such?x=1", "no#such", "no such"):
        with pytest.raises(NotFoundError, match=re.escape(odd)):
            client.dataset(odd)
        with pytest.raises(NotFoundError, match=re.escape(odd)):
            client.registered_model(odd)
    with pytest.raises(NotFoundError, match=re.escape("no?such")):
        client.model("no?such@production")


def test_an_unreachable_server_fails_after_retrying_reads_only(tmp_path: Path) -> None:
    dead = Client(f"http://127.0.0.1:{free_port()}", max_retries=2)

    started = time.monotonic()
    with pytest.raises(ConnectionFailedError, match="cannot reach"):
        dead.datasets()
    # Two retries, 0.5 s and 1 s after the failures before them.
    assert time.monotonic() - started >= 1.5

    started = time.monotonic()
    with pytest.raises(ConnectionFailedError):
        dead.upload([{"x": 1.0}])
    # Not retried (a repeat could create a second dataset): no 1.5 s of backoff first.
    assert time.monotonic() - started < 1.5


def test_reads_are_retried_until_a_starting_server_answers(tmp_path: Path) -> None:
    port = free_port()
    processes = Processes(tmp_path / "logs", data_dir=str(tmp_path / "data"), log_format="text")
    try:
        # Asked at once, while the server is still starting: connections are refused until
        # it listens, and the retries (0.5 + 1 + 2 + 4 + 8 + 8 s at most) outlast its start.
        processes.start("late", "serve", "--port", str(port), embedded_worker="false")
        client = Client(f"http://127.0.0.1:{port}", max_retries=6)

        assert client.datasets().total == 0
    finally:
        processes.stop_all()


def test_a_client_copies_and_pickles_as_its_settings(server_url: str) -> None:
    client = Client(server_url, api_key="secret", max_retries=1)
    client.datasets()  # opens the connection pool, which must not be copied

    for twin in (copy.deepcopy(client), pickle.loads(pickle.dumps(client))):
        assert twin.url == client.url and twin._transport.api_key == "secret"
        assert twin._transport._http is None
        assert twin.datasets().total == client.datasets().total


def test_url_and_key_come_from_the_environment(
    server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPPICE_URL", server_url + "/")
    monkeypatch.setenv("COPPICE_API_KEY", "from-env")

    client = Client()

    assert client.url == server_url
    assert client._transport.http.headers["Authorization"] == "Bearer from-env"
    assert isinstance(client.datasets().total, int)


def test_the_client_never_imports_the_server_or_the_engine() -> None:
    # A client verb run to its end (here failing to reach a server: exit code 8).
    code = (
        "import sys\n"
        "import coppice\n"
        "from coppice.cli import main\n"
        f"assert main(['jobs', 'list', '--url', 'http://127.0.0.1:{free_port()}']) == 8\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    environment = os.environ | {"COPPICE_MAX_RETRIES": "0"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment
    )
    assert result.returncode == 0, result.stderr

    loaded = set(ast.literal_eval(result.stdout))
    assert not loaded & {"engine", "service", "fastapi", "sqlalchemy", "numba", "pandas"}, loaded
