"""The container files describe the deployment the architecture promises.

No Docker engine runs in CI, so these check the files themselves: ``docker compose config``
validates the compose file offline where the compose plugin is installed, and a structural
check runs everywhere.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
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


def test_compose_config_is_valid() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed")

    result = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr


def test_compose_services() -> None:
    yaml = pytest.importorskip("yaml")
    compose: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    services = compose["services"]

    assert set(services) == {"api", "worker", "postgres"}
    for name in ("api", "worker"):
        service = services[name]
        assert service["environment"]["COPPICE_DATABASE_URL"] == DATABASE_URL
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        # A fixed container name would stop `--scale` from starting more than one replica.
        assert "container_name" not in service
    assert services["worker"]["command"] == ["coppice", "worker"]
    assert services["postgres"]["image"] == "postgres:16"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "postgres-data" in compose["volumes"]


def test_dockerfile_health_check_targets_ready_endpoint() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()

    assert "/v2/health/ready" in dockerfile
    assert "\nUSER " in dockerfile, "the image must not run as root"
