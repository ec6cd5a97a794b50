"""The image's tests run under ``make image-test``, which builds the image first.

Elsewhere (``make test``) they skip: building the image takes minutes and needs a container
engine, which ``make image-test`` installs where it can. Asked for, they never skip: a missing
engine or image fails them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.image.containers import Engine, started_engine


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("COPPICE_IMAGE_TEST") == "1":
        return
    skip = pytest.mark.skip(reason="the container image's tests run under `make image-test`")
    for item in items:
        if "tests/image/" in item.nodeid:
            item.add_marker(skip)


@pytest.fixture
def containers() -> Iterator[Engine]:
    """The engine that runs the image under test; every container started is removed after."""
    with started_engine(os.environ.get("COPPICE_IMAGE", "coppice:local")) as engine:
        yield engine
