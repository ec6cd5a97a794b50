"""``coppice registry ...``: registered models, their versions, aliases and alias history."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from coppice.cli.output import Column, print_fields, print_json, print_listing, print_table, when
from coppice.cli.parsing import list_verb, noun, verb
from coppice.client import Client

if TYPE_CHECKING:
    from coppice.cli.parsing import Subparsers

REGISTERED_COLUMNS: list[Column] = [
    ("name", lambda r: r["name"]),
    ("versions", lambda r: r["n_versions"]),
    ("latest", lambda r: r["latest_version"]),
    ("aliases", lambda r: _aliases(r["aliases"])),
    ("created", lambda r: when(r["created_at"])),
    ("description", lambda r: r["description"] or None),
]
VERSION_COLUMNS: list[Column] = [
    ("version", lambda v: v["version"]),
    ("model", lambda v: v["model_id"]),
    ("aliases", lambda v: ", ".join(v["aliases"]) or None),
    ("created", lambda v: when(v["created_at"])),
    ("by", lambda v: v["created_by"]),
]
MOVE_COLUMNS: list[Column] = [
    ("moved", lambda m: when(m["moved_at"])),
    ("alias", lambda m: m["alias"]),
    ("from", lambda m: m["from_version"]),
    ("to", lambda m: m["to_version"] if m["to_version"] is not None else "(removed)"),
    ("by", lambda m: m["actor"]),
]


def _aliases(aliases: dict[str, int]) -> str | None:
    return ", ".join(f"{alias}={version}" for alias, version in aliases.items()) or None


def registry_list(client: Client, args: argparse.Namespace) -> int:
    page = client.registered_models(limit=args.limit, offset=args.offset)
    return print_listing([r.info for r in page], page.total, REGISTERED_COLUMNS, args)


def registry_show(client: Client, args: argparse.Namespace) -> int:
    info = client.registered_model(args.name).info
    if args.json:
        print_json(info)
        return 0
    print_fields(
        {
            "name": info["name"],
            "description": info["description"] or None,
            "latest": info["latest_version"],
            "aliases": _aliases(info["aliases"]),
            "created": when(info["created_at"]),
        }
    )
    if info["versions"]:
        print()
        print_table(info["versions"], VERSION_COLUMNS)
    return 0


def registry_register(client: Client, args: argparse.Namespace) -> int:
    version = client.register(args.model, args.name, alias=args.alias, description=args.description)
    return _show_version(version.info, args)


def _show_version(info: dict[str, Any], args: argparse.Namespace) -> int:
    if args.json:
        print_json(info)
        return 0
    print_fields(
        {
            "name": info["name"],
            "version": info["version"],
            "model": info["model_id"],
            "aliases": ", ".join(info["aliases"]) or None,
            "created": when(info["created_at"]),
        }
    )
    return 0


def registry_alias(client: Client, args: argparse.Namespace) -> int:
    alias = client.set_alias(args.name, args.alias, args.version)
    if args.json:
        print_json(alias.info)
        return 0
    before = "(new)" if alias.previous_version is None else f"version {alias.previous_version}"
    print(f"{alias.name}@{alias.alias}: {before} -> version {alias.version} ({alias.model_id})")
    return 0


def registry_unalias(client: Client, args: argparse.Namespace) -> int:
    client.delete_alias(args.name, args.alias)
    if args.json:
        print_json({"name": args.name, "alias": args.alias, "deleted": True})
    else:
        print(f"{args.name}@{args.alias}: removed")
    return 0


def registry_history(client: Client, args: argparse.Namespace) -> int:
    page = client.alias_history(args.name, limit=args.limit, offset=args.offset)
    return print_listing([move.info for move in page], page.total, MOVE_COLUMNS, args)


def add_parsers(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "registry", "registered models: names, versions and aliases")
    list_verb(
        actions,
        registry_list,
        "registered models",
        "  coppice registry list\n  coppice registry list --json | jq '.items[].name'",
        common,
        order="by name",
    )
    show = verb(
        actions,
        "show",
        registry_show,
        "show a registered model: its versions and aliases",
        "  coppice registry show churn",
        common,
    )
    show.add_argument("name")
    register = verb(
        actions,
        "register",
        registry_register,
        "register a model as the next version of a name (created if missing)",
        "  coppice registry register 5b7d... churn --alias staging\n"
        "  coppice registry register churn@3 fraud",
        common,
    )
    register.add_argument("model", help="model id, or name@alias / name@N")
    register.add_argument("name", help="registered name")
    register.add_argument("--alias", help="point this alias at the new version")
    register.add_argument("--description", help="the name's description, if it is created")
    alias = verb(
        actions,
        "alias",
        registry_alias,
        "point an alias at a version (the move is recorded)",
        "  coppice registry alias churn production 3",
        common,
    )
    alias.add_argument("name")
    alias.add_argument("alias", help="e.g. production, staging, champion")
    alias.add_argument("version", type=int)
    unalias = verb(
        actions,
        "unalias",
        registry_unalias,
        "remove an alias (its version stays; the removal is recorded)",
        "  coppice registry unalias churn staging",
        common,
    )
    unalias.add_argument("name")
    unalias.add_argument("alias")
    history = list_verb(
        actions,
        registry_history,
        "a registered model's alias moves",
        "  coppice registry history churn",
        common,
        name="history",
    )
    history.add_argument("name")
