"""Request bodies read as streams, refused with 413 as soon as they pass a size limit."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import orjson
from fastapi import Request

from service.errors import BadRequest, PayloadTooLarge


def check_declared_length(request: Request, limit: int, *, setting: str) -> None:
    """Refuse at once a body whose Content-Length already says it is too large."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(_too_large(limit, setting))


async def read_limited(request: Request, limit: int, *, setting: str) -> bytes:
    """The whole body, read chunk by chunk and refused at the first chunk past ``limit``."""
    check_declared_length(request, limit, setting=setting)
    # Chunks joined once at the end: one copy of the body, where a growing bytearray and
    # its conversion copied a 16 MB predict body twice or more.
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        if not chunk:
            continue
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(_too_large(limit, setting))
    return bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks)


TOO_MANY_DIGITS = (
    f"The body holds an integer literal of more than {sys.get_int_max_str_digits()} digits, "
    "which cannot be read; no feature or cell can hold a number that large."
)


def parse_json(body: bytes, *, numbers_as_floats: bool = False) -> Any:
    """The body as JSON; malformed, non-UTF-8 or absurdly deep JSON is a 400, never a 500.

    ``numbers_as_floats``: the caller reads every number as a float (predict bodies), so the
    body may be parsed by orjson, four times faster than ``json`` on large bodies; orjson
    reads an integer past 64 bits as the nearest float, which ``float()`` of ``json``'s
    integer would give too. A body orjson refuses is parsed again by ``json`` below, so what
    is refused, and with which message, does not change.
    """
    if numbers_as_floats:
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(body)
    try:
        return json.loads(body)
    except json.JSONDecodeError as error:
        raise BadRequest(f"The body is not valid JSON: {error}.") from None
    except ValueError:
        # Python refuses to read an integer literal of more than 4300 digits (its guard against
        # quadratic-time conversion) with a plain ValueError, not a JSONDecodeError.
        raise BadRequest(TOO_MANY_DIGITS) from None
    except UnicodeDecodeError:
        raise BadRequest("The body is not UTF-8 text.") from None
    except RecursionError:
        # Python's parser recurses per level; thousands of nested brackets exhaust its stack.
        raise BadRequest("The body nests JSON arrays or objects too deeply.") from None


def _too_large(limit: int, setting: str) -> str:
    return (
        f"The request body is larger than this server accepts: at most {limit} bytes ({setting})."
    )
