"""Containers of the image under test, run with docker or podman and never left behind.

``make image-test`` builds the image (``deploy/image.sh build``) and names the engine that
built it in ``COPPICE_CONTAINER_ENGINE``; the image is ``COPPICE_IMAGE`` (``coppice:local``).
Each container gets a name of its own and a label, so whatever a test started is removed
with its anonymous volumes at the end, even when the test failed halfway.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.e2e.processes import submit_job, wait_for_jobs
from tests.service.models.helpers import dataset_csv, dataset_rows

LABEL = "coppice.test=image"
RECORDS = [{"x": 0.1, "z": -1.0, "colour": "red"}, {"x": None, "z": 0.4, "colour": None}]


def engine() -> str:
    """The container engine: ``COPPICE_CONTAINER_ENGINE``, else docker or podman if it runs."""
    named = os.environ.get("COPPICE_CONTAINER_ENGINE")
    if named:
        return named
    for candidate in ("docker", "podman"):
        if shutil.which(candidate) and _ok([candidate, "info"]):
            return candidate
    raise RuntimeError("neither docker nor podman runs here (`make image-test` installs podman)")


def _ok(command: list[str]) -> bool:
    return subprocess.run(command, capture_output=True, check=False, timeout=120).returncode == 0


@dataclass
class Engine:
    """One container engine's command line, and everything started through it."""

    command: str
    image: str
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)

    def run(self, *args: str, timeout: float = 120.0, check: bool = True) -> str:
        """``<engine> <args>``; its standard output (the test fails with stderr if it fails)."""
        result = subprocess.run(
            [self.command, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{self.command} {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def start(
        self,
        *command: str,
        env: Mapping[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> Container:
        """``run -d`` the image (``command`` replaces its CMD); ``options`` go before the image."""
        name = f"coppice-test-{uuid.uuid4().hex[:10]}"
        args = ["run", "-d", "--name", name, "--label", LABEL, *options]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        self.containers.append(name)
        self.run(*args, self.image, *command)
        return Container(self, name)

    def volume(self) -> str:
        """A new named volume, removed at the end (a disk that outlives its containers)."""
        name = f"coppice-test-{uuid.uuid4().hex[:10]}"
        self.run("volume", "create", "--label", LABEL, name)
        self.volumes.append(name)
        return name

    def remove_all(self) -> None:
        for name in self.containers:
            self.run("rm", "-f", "-v", name, check=False)
        for name in self.volumes:
            self.run("volume", "rm", "-f", name, check=False)
        self.containers.clear()
        self.volumes.clear()


@dataclass
class Container:
    """A started container, by name."""

    engine: Engine
    name: str

    def logs(self) -> str:
        result = subprocess.run(
            [self.engine.command, "logs", self.name],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return result.stdout + result.stderr

    def running(self) -> bool:
        state = self.engine.run("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return state.strip() == "true"

    def exec(self, *command: str) -> str:
        return self.engine.run("exec", self.name, *command)

    def kill(self) -> None:
        """SIGKILL the container's main process; every process in it dies with it."""
        self.engine.run("kill", "--signal", "KILL", self.name)
        self.engine.run("wait", self.name, timeout=60, check=False)

    def wait_for_log(self, text: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in (logs := self.logs()):
            assert self.running(), f"{self.name} exited:\n{logs[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r} in {self.name}'s log:\n{logs[-4000:]}"
            time.sleep(0.2)

    def wait_until_ready(self, base_url: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base_url}/v2/health/ready", timeout=2).status_code == 200:
                    return
            assert self.running(), f"{self.name} exited:\n{self.logs()[-4000:]}"
            time.sleep(0.2)
        raise AssertionError(f"{self.name} did not become ready:\n{self.logs()[-4000:]}")


@contextlib.contextmanager
def started_engine(image: str) -> Iterator[Engine]:
    """The engine, checked to hold ``image``; removes everything started through it on exit."""
    found = Engine(engine(), image)
    if not _ok([found.command, "image", "inspect", image]):
        raise RuntimeError(f"no image {image} in {found.command}'s store: run `make image` first")
    try:
        yield found
    finally:
        found.remove_all()


# --- driving the service as a user does ------------------------------------------------------


def upload_and_train(client: httpx.Client) -> dict[str, Any]:
    """A CSV upload and a forest trained on it, as a user does; returns the ended job."""
    uploaded = client.post(
        "/v1/datasets",
        files={"file": ("image.csv", dataset_csv(dataset_rows(200)), "text/csv")},
        data={"name": "image-test"},
    )
    assert uploaded.status_code == 201, uploaded.text
    job_id = submit_job(
        client,
        dataset_id=uploaded.json()["id"],
        target="label",
        features=["x", "z", "colour"],
        method="random_forest",
        task="classification",
        params={"n_estimators": 20},
        seed=0,
    )
    job = wait_for_jobs(client, [job_id], timeout=300)[job_id]
    assert job["status"] == "succeeded", job
    return job


def predict(client: httpx.Client, model_id: str) -> tuple[list[Any], float]:
    """The model's predictions of :data:`RECORDS`, and the seconds the answer took."""
    started = time.perf_counter()
    response = client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})
    seconds = time.perf_counter() - started
    assert response.status_code == 200, response.text
    predictions: list[Any] = response.json()["predictions"]
    assert len(predictions) == len(RECORDS)
    return predictions, seconds
