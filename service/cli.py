"""The server's commands: ``coppice serve``, ``worker`` and ``migrate``.

The ``coppice`` console script is :mod:`coppice.cli`, which hands these three here (and
imports this module only then); ``python -m service`` runs them directly.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
from collections.abc import Callable, Sequence

from pydantic import ValidationError

from service.config import Settings
from service.logs import configure_logging

# uvicorn's exit status when the server could not start.
STARTUP_FAILURE = 3


# The shell's exit status for a command ended by Ctrl-C.
INTERRUPTED = 130


def _wait_for_database(settings: Settings) -> bool:
    """False if Ctrl-C ended the wait (which may be long: the database may never come)."""
    # Imported here so `coppice --help` stays fast and free of the database stack.
    from service.db.wait import wait_for_database

    try:
        wait_for_database(settings.resolved_database_url)
    except KeyboardInterrupt:
        return False
    return True


def _migrate(settings: Settings) -> None:
    # Imported here so `coppice --help` stays fast and free of the database stack.
    from service.db.migrate import upgrade_to_head

    upgrade_to_head(settings.resolved_database_url)


def _cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    _migrate(settings)
    return 0


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from service.app import create_app

    overrides = {
        name: value for name in ("host", "port") if (value := getattr(args, name)) is not None
    }
    # model_validate, unlike model_copy, range-checks the command-line values too.
    settings = Settings.model_validate(settings.model_dump() | overrides)
    # A database that starts after the server (compose, a cluster) is waited for, not fatal.
    if not _wait_for_database(settings):
        return INTERRUPTED
    # Migrating first means a fresh data dir or an upgraded release serves at once.
    _migrate(settings)
    # log_config=None: uvicorn's records go through configure_logging's handler like all
    # others; its access log is off because service.observability writes a richer one.
    app = create_app(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host=settings.host, port=settings.port, log_config=None, access_log=False
        )
    )
    # Requests that wait (GET /v1/jobs/{id}?wait=) ask this, and answer when it turns true.
    app.state.stopping = lambda: server.should_exit
    _freeze_start_up_objects()
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    # As uvicorn.run: a server that never started (the port taken, say) is a failure.
    return 0 if server.started else STARTUP_FAILURE


def _freeze_start_up_objects() -> None:
    """Keep the objects made at start-up (the modules of FastAPI, SQLAlchemy, NumPy, Numba and
    the engine: ~200,000) out of every later garbage collection.

    A full collection walks every tracked object, ~0.12 s here; decoding a large predict body
    allocates enough containers to set one off every few requests, which showed as a 0.1 s
    step in the 20,000-row predicts' times. Frozen objects are never collected, so this is done
    once, after start-up, when they are all meant to live as long as the process (the same
    use as the ``gc.freeze`` documentation's, before forking).
    """
    gc.collect()
    gc.freeze()


def _cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from service.worker.claim_loop import run_worker

    if not _wait_for_database(settings):
        return INTERRUPTED
    return run_worker(settings)


Command = Callable[[argparse.Namespace, Settings], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coppice",
        description="Coppice: train and serve ensemble ML models over HTTP. "
        "Configured by COPPICE_* environment variables.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="migrate the database, then serve the HTTP API")
    serve.add_argument("--host", help="interface to bind (default: COPPICE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default: COPPICE_PORT or 8000)")
    serve.set_defaults(handler=_cmd_serve)

    worker = commands.add_parser("worker", help="run training jobs from the queue")
    worker.set_defaults(handler=_cmd_worker)

    migrate = commands.add_parser("migrate", help="upgrade the database to the newest schema")
    migrate.set_defaults(handler=_cmd_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coppice`` console script; returns the process exit code."""
    args = build_parser().parse_args(argv)
    handler: Command = args.handler
    try:
        settings = Settings()
        # One set-up for every command: JSON lines (or text) on stderr, with request and job
        # ids; it also carries Alembic's progress lines ("Running upgrade ...").
        configure_logging(settings.log_level, settings.log_format)
        # Alembic announces each of its plugins at INFO on every start; operators need none of it.
        logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
        return handler(args, settings)
    except ValidationError as error:
        # A mistyped COPPICE_* variable is a user error: say which, without a traceback (and
        # without the value, which Settings keeps out of its errors: it may be a secret).
        print(f"coppice: invalid configuration: {error}", file=sys.stderr)
        return 2
