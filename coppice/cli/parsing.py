"""The command line's parser parts every noun uses: common options, verbs, groups, listings."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from coppice.cli.exits import EXIT_CODES_HELP
from coppice.client import Client

if TYPE_CHECKING:  # argparse's class takes no subscript at run time
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[Client, argparse.Namespace], int]


def common_options() -> argparse.ArgumentParser:
    """Options every client verb takes, after the verb: ``coppice jobs list --json``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="server URL (default: COPPICE_URL or http://127.0.0.1:8000)")
    common.add_argument("--api-key", help="API key (default: COPPICE_API_KEY)")
    common.add_argument("--json", action="store_true", help="print JSON, for scripts")
    return common


def verb(
    parent: Subparsers,
    name: str,
    handler: Handler,
    help_text: str,
    examples: str,
    common: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    parser = parent.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=f"examples:\n{examples}\n\n{EXIT_CODES_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.set_defaults(handler=handler)
    return parser


def noun(top: Subparsers, name: str, help_text: str) -> Subparsers:
    """A noun with actions of its own: ``coppice jobs list``."""
    return top.add_parser(name, help=help_text).add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )


def list_verb(
    parent: Subparsers,
    handler: Handler,
    what: str,
    examples: str,
    common: argparse.ArgumentParser,
    *,
    name: str = "list",
    order: str = "newest first",
) -> argparse.ArgumentParser:
    """``list`` (or another listing verb), paged as the API pages: ``--limit``, ``--offset``."""
    listing = verb(parent, name, handler, f"list {what}, {order}", examples, common)
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument("--offset", type=int, default=0, help=f"skip this many, {order}")
    return listing
