"""The server's commands: ``coppice serve``, ``worker``, ``migrate`` and ``store gc``.

The ``coppice`` console script is :mod:`coppice.cli`, which hands these here (and imports
this module only then); ``python -m service`` runs them directly.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from pydantic import ValidationError

from service.config import Settings
from service.logs import configure_logging

# `coppice store gc`'s default --older-than (service.store.gc.DEFAULT_GRACE, kept here so
# `coppice --help` needs no database stack; a test checks the two agree).
DEFAULT_GRACE = timedelta(days=1)

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


def _wait_for_store(settings: Settings) -> bool:
    """As ``_wait_for_database``, for the data store (a bucket that starts after the server)."""
    from service.store import store_from_settings
    from service.store.wait import wait_for_store

    try:
        wait_for_store(store_from_settings(settings))
    except KeyboardInterrupt:
        return False
    return True


def _wait_for_backends(settings: Settings) -> bool:
    return _wait_for_database(settings) and _wait_for_store(settings)


def _migrate(settings: Settings) -> None:
    # Imported here so `coppice --help` stays fast and free of the database stack.
    from service.db.migrate import upgrade_to_head
    from service.store import store_from_settings

    # The store too: a revision may move bytes out of the database into it (0007: artifacts).
    upgrade_to_head(settings.resolved_database_url, store_from_settings(settings))


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
    # A database or store that starts after the server (compose, a cluster) is waited for,
    # not fatal.
    if not _wait_for_backends(settings):
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

    if not _wait_for_backends(settings):
        return INTERRUPTED
    return run_worker(settings)


def _duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h``, ``7d`` or plain seconds (``0``) as a ``timedelta``."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: say 90s, 15m, 12h, 7d or a number of seconds"
        ) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError("a duration cannot be negative")
    return timedelta(seconds=seconds)


def _cmd_store_gc(args: argparse.Namespace, settings: Settings) -> int:
    from service.db.session import create_db_engine, reading
    from service.store import store_from_settings
    from service.store.gc import sweep

    store = store_from_settings(settings)
    engine = create_db_engine(settings.resolved_database_url)
    try:
        with reading(engine) as session:
            report = sweep(store, session, grace=args.older_than, dry_run=args.dry_run)
    finally:
        engine.dispose()
    verb = "would delete" if report.dry_run else "deleted"
    for path in report.swept:
        print(f"{verb} {path}")
    print(
        f"{verb} {len(report.swept)} object(s), {report.swept_bytes} bytes; kept "
        f"{report.named} named and {report.recent} unnamed but younger than "
        f"{args.older_than} ({store.url})"
    )
    _sweep_spooled_uploads(settings, args.older_than, dry_run=args.dry_run, verb=verb)
    return 0


def _sweep_spooled_uploads(
    settings: Settings, older_than: timedelta, *, dry_run: bool, verb: str
) -> None:
    """Uploads spooled to disk by a server killed before it could delete them."""
    from service.datasets.formats import stale_spools

    directory = settings.data_dir / "uploads"
    stale = stale_spools(directory, time.time() - older_than.total_seconds())
    swept_bytes = 0
    for path in stale:
        try:
            size = path.stat().st_size
            if not dry_run:
                path.unlink()
        except FileNotFoundError:
            continue
        swept_bytes += size
        print(f"{verb} {path}")
    print(f"{verb} {len(stale)} spooled upload(s), {swept_bytes} bytes ({directory})")


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

    store = commands.add_parser("store", help="look after the data store")
    store_commands = store.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    gc_parser = store_commands.add_parser(
        "gc",
        help="delete objects no database row names (left by a crash between writing an "
        "object and committing its row)",
    )
    gc_parser.add_argument(
        "--older-than",
        type=_duration,
        default=DEFAULT_GRACE,
        metavar="AGE",
        help="only objects at least this old (90s, 15m, 12h, 7d; default 1d): younger ones may "
        "belong to an upload or a fit still running",
    )
    gc_parser.add_argument(
        "--dry-run", action="store_true", help="list what would be deleted, delete nothing"
    )
    gc_parser.set_defaults(handler=_cmd_store_gc)
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
