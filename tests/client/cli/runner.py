"""Runs ``coppice ...`` in the test's process, with its output captured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coppice.cli import main


class Cli:
    """Runs ``coppice ...`` in this process against the test server."""

    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = url
        self.capsys = capsys

    def __call__(self, *args: str, code: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        assert main([*args, "--url", self.url]) == code
        out, err = self.capsys.readouterr()
        return out, err

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json")[0])
