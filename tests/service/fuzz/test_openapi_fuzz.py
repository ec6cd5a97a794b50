"""Every operation of ``/openapi.json``, fuzzed by Schemathesis against the real ASGI app.

Schemathesis reads the app's own OpenAPI document and generates requests for each operation,
valid and invalid ones, sends them in process and checks every answer: never a 5xx, a body that
matches the response schema the document declares for its status, and for ``/v1`` every 4xx
an ``application/problem+json`` document with ``title``, ``status`` and ``detail``.

The app runs on a copy of the fuzz seed (a dataset, a finished job and two fitted models), and
about half of the valid generated requests have their path ids replaced by those real ids, so
model and dataset routes are exercised past their 404s. ``DELETE`` keeps its generated ids:
deleting the seed would turn every later request into a 404.

``make fuzz`` runs this file with many more examples (``COPPICE_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import Case, GenerationMode
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from service.app import create_app
from service.config import Settings
from tests.service.fuzz.conftest import Seed
from tests.service.fuzz.problems import examples, problem_fault

# The document is built at collection, from an app that is never started (nothing is opened
# before its lifespan runs); each test sends its requests to its own running app instead
# (``app=``), and the last test checks that a running app serves this very document.
_DOCUMENT_APP = create_app(
    Settings(data_dir=Path("coppice-fuzz-unused"), database_url=None, embedded_worker=False)
)
schema = schemathesis.openapi.from_dict(_DOCUMENT_APP.openapi())
schema.app = _DOCUMENT_APP


def problem_details(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """A ``/v1`` 4xx is RFC 9457 problem details (``/v2`` has the protocol's own shape)."""
    if not 400 <= response.status_code < 500 or not case.path.startswith("/v1/"):
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    try:
        body = json.loads(response.content)
    except ValueError:
        body = response.text
    fault = problem_fault(response.status_code, content_type, body)
    if fault is not None:
        raise AssertionError(fault)
    return None


def use_seeded_ids(case: Case, seed: Seed) -> None:
    """Point about half of the valid cases' path ids at the seed's dataset, job, classifier,
    registered model (its name, alias and version) and search.

    Which half is decided by a hash of the generated ids, not by a Hypothesis draw: a strategy
    of its own (``schema.given``) would switch off Schemathesis's coverage phase, the one that
    tries the boundary values.
    """
    real: dict[str, object] = {
        "dataset_id": seed.dataset_id,
        "job_id": seed.job_id,
        "model_id": seed.classifier_id,
        "name": seed.registered_name,
        "alias": seed.alias,
        "version": "1",
        "search_id": seed.search_id,
    }
    generated = case.path_parameters or {}
    if (
        case.method.upper() == "DELETE"
        or not real.keys() & generated.keys()
        or case.meta is None
        or case.meta.generation.mode is not GenerationMode.POSITIVE
        or zlib.crc32(repr(sorted(generated.items())).encode()) % 2
    ):
        return
    for name in real.keys() & generated.keys():
        generated[name] = real[name]


@schema.parametrize()
@settings(
    max_examples=examples(25),
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_without_a_server_error(
    case: Case, seed: Seed, fuzz_app: FastAPI
) -> None:
    use_seeded_ids(case, seed)
    case.call_and_validate(
        app=fuzz_app,
        checks=[
            not_a_server_error,
            content_type_conformance,
            response_schema_conformance,
            problem_details,
        ],
    )


@pytest.mark.anyio
async def test_the_running_app_serves_the_fuzzed_document(fuzz_client: httpx.AsyncClient) -> None:
    assert (await fuzz_client.get("/openapi.json")).json() == schema.raw_schema
