"""The compose stack, run: ``docker-compose.yml`` with the host-PostgreSQL override.

No PostgreSQL or SeaweedFS image can be pulled here, which is what the override is for: the API
(``api-host``), a worker and the store run on the host's network, and the ``postgres`` service
is the stand-in that waits for the host's server. The store runs SeaweedFS's image where the
engine holds it, else the same ``weed`` from PyPI on the stand-in base (``deploy/image.sh
store``). Compose (``docker compose`` or Debian's ``docker-compose``) drives docker, or podman
through its Docker-compatible socket, started here for the test.

A test override on top changes only what this machine needs: free ports (others may be busy),
a throwaway database, and ``service_started`` for the stand-in's ``service_healthy`` when the
engine is podman, whose health checks run from systemd timers that a sandbox does not have.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import free_port
from tests.image.containers import Engine, predict, upload_and_train
from tests.postgres import throwaway_database

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "docker-compose.yml", REPO / "docker-compose.host-postgres.yml"]


def _compose_command() -> list[str]:
    if shutil.which("docker") and _succeeds(["docker", "compose", "version"]):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise AssertionError("no compose: `make image-test` installs Debian's docker-compose")


def _succeeds(command: list[str]) -> bool:
    return subprocess.run(command, capture_output=True, check=False, timeout=60).returncode == 0


@contextlib.contextmanager
def _docker_api(containers: Engine, directory: Path) -> Iterator[dict[str, str]]:
    """The environment that points compose at the engine: podman's socket, started here."""
    if containers.command != "podman":
        yield {}
        return
    socket = directory / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            assert service.poll() is None, "podman system service exited"
            assert time.monotonic() < deadline, "podman's socket did not appear"
            time.sleep(0.1)
        yield {"DOCKER_HOST": f"unix://{socket}"}
    finally:
        service.terminate()
        try:
            service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


def _free_ports(count: int) -> list[int]:
    """Ports p free with p + 10000 free too (weed's gRPC port for each of its HTTP ports)."""
    found: list[int] = []
    while len(found) < count:
        port = free_port()
        if port + 10000 <= 65535 and port not in found and _free(port + 10000):
            found.append(port)
    return found


def _free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _test_override(
    containers: Engine, store_image: str, api_port: int, s3: int
) -> dict[str, object]:
    master, volume, filer, admin = _free_ports(4)
    endpoint = f"http://127.0.0.1:{s3}"
    # The override's own store options, with this test's S3 port.
    options = json.dumps(
        {"endpoint_url": endpoint, "key": "coppice", "secret": "coppice-store-secret"}
    )
    after: dict[str, object] = {"store": {"condition": "service_started"}}
    if containers.command == "podman":
        after["postgres"] = {"condition": "service_started"}
    return {
        "services": {
            "api-host": {
                "command": ["coppice", "serve", "--host", "127.0.0.1", "--port", str(api_port)],
                "environment": {"COPPICE_STORE_OPTIONS": options},
                "depends_on": after,
            },
            "worker": {"environment": {"COPPICE_STORE_OPTIONS": options}, "depends_on": after},
            "store": {
                "image": store_image,
                "command": [
                    "mini", "-dir=/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                    f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}",
                    f"-filer.port={filer}", f"-admin.port={admin}", "-admin.ui=false",
                    "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                    "-master.telemetry=false",
                ],
            },
        }
    }  # fmt: skip


def test_the_stack_with_the_host_postgres_override_trains_and_predicts(
    containers: Engine, tmp_path: Path
) -> None:
    compose = _compose_command()
    store_image = subprocess.run(
        ["bash", str(REPO / "deploy" / "image.sh"), "store"],
        capture_output=True, text=True, check=True, timeout=600,
        env=os.environ | {"COPPICE_CONTAINER_ENGINE": containers.command},
    ).stdout.strip()  # fmt: skip
    api_port, (s3_port,) = free_port(), _free_ports(1)
    override = tmp_path / "docker-compose.test.yml"
    # JSON is YAML: compose reads it as it is.
    override.write_text(json.dumps(_test_override(containers, store_image, api_port, s3_port)))
    project = f"coppice-test-{uuid.uuid4().hex[:8]}"
    files = [argument for path in [*FILES, override] for argument in ("-f", str(path))]

    with throwaway_database() as url, _docker_api(containers, tmp_path) as api_env:
        env = os.environ | api_env | {"COPPICE_HOST_DATABASE_URL": url}

        def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*compose, "-p", project, *files, *args],
                capture_output=True, text=True, env=env, timeout=timeout, check=False,
            )  # fmt: skip

        try:
            started = run("up", "-d", "--no-build", "--scale", "worker=2")
            assert started.returncode == 0, started.stdout + started.stderr
            base_url = f"http://127.0.0.1:{api_port}"
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{base_url}/v2/health/ready", timeout=2).status_code == 200:
                        break
                assert time.monotonic() < deadline, run("logs", "--tail", "50").stdout
                time.sleep(0.5)
            with httpx.Client(base_url=base_url, timeout=120) as client:
                jobs = [upload_and_train(client) for _ in range(2)]
                for job in jobs:
                    predict(client, job["model_id"])
            # The store's S3 gateway answers (403: an unsigned request, with keys configured).
            store = httpx.get(f"http://127.0.0.1:{s3_port}/coppice", timeout=10)
            assert store.status_code == 403, store.text
            listed = run("ps").stdout
            # Two workers beside the API, the store and the stand-in; none restarting.
            for service in ("api-host", "worker", "store", "postgres"):
                assert service in listed, listed
            assert "Restarting" not in listed and "Exit" not in listed, listed
        finally:
            stopped = run("down", "-v", "--timeout", "20")
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
