"""The ``cli`` fixture: ``coppice ...`` against the shared test server (tests/client/conftest.py)."""

from __future__ import annotations

import pytest

from tests.client.cli.runner import Cli


@pytest.fixture
def cli(server_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(server_url, capsys)
