"""The shipped image, run as a user runs it: one container on SQLite, and an API container
beside a ``coppice worker`` container on the host's PostgreSQL.

Each drives the service over HTTP as a user would: health, a CSV upload, a training job, a
prediction. The single container also shows that the kernels compiled at build time are the
ones the server loads: a fresh container trains and predicts without writing anything new to
``NUMBA_CACHE_DIR`` (a cache miss would compile and write; the times are printed as figures,
never asserted).
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from tests.e2e.processes import free_port
from tests.image.containers import Container, Engine, predict, upload_and_train
from tests.postgres import throwaway_database

# Fits and container starts on a loaded machine may outlast pytest's default 300 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CACHE_DIR = "/app/numba-cache"


def _cache(container: Container) -> dict[str, str]:
    """Every file in the container's Numba cache, with its size and modification time."""
    listing = container.exec("find", CACHE_DIR, "-type", "f", "-printf", r"%P %s %T@\n")
    return dict(line.split(" ", 1) for line in listing.splitlines() if line)


def _wait_healthy(containers: Engine, container: Container) -> None:
    """The image's own HEALTHCHECK passes in the running container."""
    if containers.command == "podman":
        # Podman runs health checks from systemd timers, absent in a sandbox: run it once.
        containers.run("healthcheck", "run", container.name)
        return
    deadline = time.monotonic() + 90
    while (
        status := containers.run("inspect", "--format", "{{.State.Health.Status}}", container.name)
    ).strip() != "healthy":
        assert time.monotonic() < deadline, f"health: {status}"
        time.sleep(1)


def test_the_image_keeps_its_health_check(containers: Engine) -> None:
    # Podman's default OCI format would drop it; deploy/image.sh builds the Docker format.
    health = json.loads(
        containers.run(
            "image", "inspect", "--format", "{{json .Config.Healthcheck}}", containers.image
        )
    )

    assert health, "the image has no HEALTHCHECK"
    assert "/v2/health/ready" in " ".join(health["Test"])


def test_a_fresh_container_serves_trains_and_predicts_on_the_kernels_built_in(
    containers: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    container = containers.start(options=("-p", f"127.0.0.1:{port}:8000"))
    base_url = f"http://127.0.0.1:{port}"
    container.wait_until_ready(base_url)
    assert container.exec("id", "-u").strip() == "10001", "the server must not run as root"
    _wait_healthy(containers, container)
    built_in = _cache(container)
    assert built_in, f"the image holds no compiled kernels in {CACHE_DIR}"

    with httpx.Client(base_url=base_url, timeout=120) as client:
        job = upload_and_train(client)
        after_fit = _cache(container)
        first, first_seconds = predict(client, job["model_id"])
        second, second_seconds = predict(client, job["model_id"])
    after_predict = _cache(container)

    # A cache miss compiles, then writes the machine code (and its index) to the cache.
    assert after_fit == built_in, (
        f"the fit compiled: {set(after_fit.items()) - set(built_in.items())}"
    )
    assert after_predict == built_in, (
        f"the first predict compiled: {set(after_predict.items()) - set(built_in.items())}"
    )
    assert first == second
    with capsys.disabled():
        print(
            f"\n[image] fresh container: first predict {first_seconds * 1000:.0f} ms, "
            f"second {second_seconds * 1000:.0f} ms; {len(built_in)} cache files, none written"
        )


@pytest.mark.postgres
def test_an_api_and_a_worker_container_share_the_hosts_postgresql(containers: Engine) -> None:
    with throwaway_database() as url:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        # The host's network: the server at 127.0.0.1:5432 is the host's, not the container's.
        # One /data for both: the data store's default directory, where the worker writes the
        # model's artifact and the API reads it (several hosts would share an S3 bucket).
        host = ("--network", "host", "-v", f"{containers.volume()}:/data")
        env = {"COPPICE_DATABASE_URL": url, "COPPICE_LOG_FORMAT": "text"}
        api = containers.start(
            "coppice", "serve", "--host", "127.0.0.1", "--port", str(port),
            env=env | {"COPPICE_EMBEDDED_WORKER": "false"},
            options=host,
        )  # fmt: skip
        api.wait_until_ready(base_url)
        worker = containers.start("coppice", "worker", env=env, options=host)

        with httpx.Client(base_url=base_url, timeout=120) as client:
            job = upload_and_train(client)
            predict(client, job["model_id"])
        # The API runs no worker: the job was the worker container's.
        assert job["id"] in worker.logs(), worker.logs()[-4000:]
        assert job["id"] not in api.logs().replace(f"/v1/jobs/{job['id']}", "")


@pytest.mark.postgres
def test_a_container_waits_for_its_database_and_says_so(containers: Engine) -> None:
    """Started before its database exists, the container logs the wait, then serves."""
    with throwaway_database() as url:
        late = make_url(url).set(database=f"{make_url(url).database}_late")
        port = free_port()
        api = containers.start(
            "coppice", "serve", "--host", "127.0.0.1", "--port", str(port),
            env={
                "COPPICE_DATABASE_URL": late.render_as_string(hide_password=False),
                "COPPICE_LOG_FORMAT": "text",
            },
            options=("--network", "host"),
        )  # fmt: skip
        admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            api.wait_for_log("unreachable")
            assert api.running()
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{late.database}"'))
            api.wait_until_ready(f"http://127.0.0.1:{port}")
            logs = api.logs()
            assert "reachable after" in logs
            assert "Traceback" not in logs
        finally:
            # The container first, or the drop would wait for its connections.
            containers.remove_all()
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{late.database}" WITH (FORCE)'))
            admin.dispose()
