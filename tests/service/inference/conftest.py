"""Inference fixtures: the model tests' app, and models trained into it.

Decoding tensors does not depend on the database, so tests run on SQLite unless marked with
``helpers.BOTH_BACKENDS``; the ones that are (model loading, the /v1 equality, binary round trips)
also run on PostgreSQL.
"""

from __future__ import annotations

import pytest

# The same app and training helper as the /v1 model tests, so /v2 answers can equal /v1's.
from tests.service.models.conftest import service_settings, svc

__all__ = ["backend", "service_settings", "svc"]


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))
