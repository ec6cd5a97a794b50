"""Logging: one set-up for every ``coppice`` command, JSON lines or text, with context.

:func:`configure_logging` (called by the CLI, from ``COPPICE_LOG_LEVEL`` and
``COPPICE_LOG_FORMAT``) sends every record to standard error, one line each. A JSON line holds
``timestamp`` (ISO 8601 UTC), ``level``, ``logger``, ``message``, the context in force —
``request_id`` inside an HTTP request, ``job_id`` inside a worker's job — any ``extra`` fields
of the call (the access log's ``method``, ``route``, ``status``, ``duration_ms``, ...) and
``exception`` when there is a traceback.

The context lives in :mod:`contextvars`, so it follows a request into the threads FastAPI runs
handlers in and stays out of every other request; :func:`bound` sets it for a block.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["json", "text"]

request_id_var: ContextVar[str | None] = ContextVar("coppice_request_id", default=None)
job_id_var: ContextVar[str | None] = ContextVar("coppice_job_id", default=None)
_CONTEXT: tuple[tuple[str, ContextVar[str | None]], ...] = (
    ("request_id", request_id_var),
    ("job_id", job_id_var),
)

# Every attribute a bare LogRecord has; anything else on a record came from ``extra=``, except
# uvicorn's ``color_message`` (the message again, with terminal colour codes).
_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


@contextmanager
def bound(var: ContextVar[str | None], value: str | None) -> Iterator[None]:
    """Set one context field (``request_id_var``, ``job_id_var``) for the block."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The context and ``extra`` fields of ``record``, in a stable order."""
    fields: dict[str, Any] = {}
    for name, var in _CONTEXT:
        value = var.get()
        if value is not None:
            fields[name] = value
    for name, value in record.__dict__.items():
        if name not in _RECORD_ATTRIBUTES and not name.startswith("_"):
            fields[name] = value
    return fields


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "timestamp": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        document.update(record_fields(record))
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra field of any type must not cost the log line.
        return json.dumps(document, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``timestamp LEVEL logger: message key=value ...`` for people at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        fields = record_fields(record)
        if fields:
            line += " " + " ".join(f"{name}={value}" for name, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time, like ``logging.lastResort``.

    A handler that kept the stream it was made with would write to a closed file once a test
    harness has swapped ``sys.stderr`` back.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def make_formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(level: str = "INFO", log_format: LogFormat = "json") -> logging.Handler:
    """Send all records at ``level`` and above to standard error in ``log_format``.

    Idempotent: a second call replaces the handler the first one installed and leaves every
    other handler (a test harness's, say) alone. Returns the installed handler.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _StderrHandler):
            root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(make_formatter(log_format))
    root.addHandler(handler)
    root.setLevel(level)
    return handler
