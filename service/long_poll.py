"""``?wait=S`` on a GET of one thing that ends (a job, a search): answer once it has ended.

One request instead of a client's polling loop: the server reads the row every
:data:`POLL_SECONDS` (a primary-key read costs it a hundredth of what a client polling over
HTTP as often would, and a fit beside it on a small machine feels the difference) and answers
as soon as the thing has ended, after ``S`` seconds, or at once when the server begins to shut
down (uvicorn waits for requests in flight, so a waiting request must not hold it up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, TypeVar

import anyio
from anyio import to_thread
from fastapi import Query, Request

__all__ = ["MAX_WAIT_SECONDS", "POLL_SECONDS", "Wait", "wait_until"]

MAX_WAIT_SECONDS = 30.0
POLL_SECONDS = 0.1

Wait = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=(
            f"Seconds to wait for it to end before answering (at most {MAX_WAIT_SECONDS:g}): "
            "the answer comes as soon as it has ended, or with its state then. One request "
            "instead of a polling loop."
        ),
    ),
]

Thing = TypeVar("Thing")


async def wait_until(
    request: Request, wait: float, read: Callable[[], Thing], ended: Callable[[Thing], bool]
) -> Thing:
    """``read()`` (in a thread, a fresh session each time) until ``ended`` says so, ``wait``
    seconds pass, or the server is stopping; the last read."""
    deadline = time.monotonic() + wait
    while True:
        thing = await to_thread.run_sync(read)
        remaining = deadline - time.monotonic()
        if ended(thing) or remaining <= 0 or _stopping(request):
            return thing
        await anyio.sleep(min(POLL_SECONDS, remaining))


def _stopping(request: Request) -> bool:
    return bool(getattr(request.app.state, "stopping", lambda: False)())
