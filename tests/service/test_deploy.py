"""The container files describe the deployment the architecture promises.

No Docker engine runs in CI, so these check the files themselves: ``docker compose config``
(or Debian's ``docker-compose config``, which ``make test`` installs where it can) validates
the compose file offline against the Compose specification, and a structural check runs
everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
HOST_POSTGRES_FILE = REPO / "docker-compose.host-postgres.yml"
DATABASE_URL = "postgresql+psycopg://coppice:coppice@postgres:5432/coppice"


def _compose_command() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False, timeout=30
        )
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.fixture
def compose_command() -> list[str]:
    command = _compose_command()
    if command is None:
        message = "neither the docker compose plugin nor docker-compose is installed"
        if os.environ.get("COPPICE_REQUIRE_COMPOSE") == "1":
            pytest.fail(message + " (COPPICE_REQUIRE_COMPOSE=1; `make test` installs it)")
        pytest.skip(message)
    return command


def _compose_config(command: list[str], *paths: Path) -> subprocess.CompletedProcess[str]:
    files = [argument for path in paths for argument in ("-f", str(path))]
    return subprocess.run(
        [*command, *files, "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_compose_config_is_valid(compose_command: list[str]) -> None:
    result = _compose_config(compose_command, COMPOSE_FILE)

    assert result.returncode == 0, result.stderr


def test_compose_config_with_the_host_postgres_override_is_valid(
    compose_command: list[str],
) -> None:
    result = _compose_config(compose_command, COMPOSE_FILE, HOST_POSTGRES_FILE)

    assert result.returncode == 0, result.stderr


def test_compose_config_refuses_a_misspelt_option(
    compose_command: list[str], tmp_path: Path
) -> None:
    # The check above is only worth something if the checker validates against the spec.
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("stop_grace_period:", "stop_grace_perod:"))

    result = _compose_config(compose_command, broken)

    assert result.returncode != 0
    assert "stop_grace_perod" in result.stdout + result.stderr


def test_compose_services() -> None:
    yaml = pytest.importorskip("yaml")
    compose: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    services = compose["services"]

    assert {name for name, service in services.items() if "profiles" not in service} == {
        "api",
        "worker",
        "postgres",
        "store",
    }
    # The optional Dask cluster, from the same image (docs/operations.md).
    dask = {name for name, service in services.items() if "dask" in service.get("profiles", [])}
    assert dask == {"dask-scheduler", "dask-worker"}
    for name in ("api", "worker"):
        service = services[name]
        assert service["environment"]["COPPICE_DATABASE_URL"] == DATABASE_URL
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        # A fixed container name would stop `--scale` from starting more than one replica.
        assert "container_name" not in service
        # One bucket of the store service, shared by every replica (issue 23's settings).
        assert service["environment"]["COPPICE_STORE_URL"] == "s3://coppice/store"
        options = json.loads(service["environment"]["COPPICE_STORE_OPTIONS"])
        assert options["endpoint_url"] == "http://store:8333"
        assert {"key", "secret"} <= set(options)
        assert service["depends_on"]["store"]["condition"] == "service_started"
    assert services["worker"]["command"] == ["coppice", "worker"]
    assert services["postgres"]["image"] == "postgres:16"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "postgres-data" in compose["volumes"]
    store = services["store"]
    assert store["image"].startswith("chrislusf/seaweedfs")
    assert store["environment"]["S3_BUCKET"] == "coppice"
    assert "store-data:/data" in store["volumes"]
    assert "store-data" in compose["volumes"]


def test_host_postgres_override() -> None:
    """Every service that talks to PostgreSQL or the store is on the host's network."""
    yaml = pytest.importorskip("yaml")
    services: dict[str, Any] = yaml.safe_load(HOST_POSTGRES_FILE.read_text())["services"]

    for name in ("api-host", "worker", "store", "postgres"):
        assert services[name]["network_mode"] == "host", name
    # Compose refuses published ports on the host's network: the bridged API is never started.
    assert services["api"] == {"profiles": ["bridged-api"]}
    assert "ports" not in services["api-host"]
    assert services["api-host"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api-host", "worker"):
        environment = services[name]["environment"]
        assert "@127.0.0.1:5432/" in environment["COPPICE_DATABASE_URL"]
        assert environment["COPPICE_STORE_URL"] == "s3://coppice/store"
        options = json.loads(environment["COPPICE_STORE_OPTIONS"])
        assert options["endpoint_url"] == "http://127.0.0.1:8333"
    # The stand-in runs no server: it is healthy when the host's server answers.
    postgres = services["postgres"]
    assert postgres["image"] == "coppice:local"
    assert "5432" in " ".join(postgres["healthcheck"]["test"])


def test_dockerfile_health_check_targets_ready_endpoint() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()

    assert "/v2/health/ready" in dockerfile
    assert "\nUSER " in dockerfile, "the image must not run as root"
