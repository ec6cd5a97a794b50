"""``coppice search ...``: start, list, show, cancel searches, and print their leaderboards."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coppice.cli.exits import JOB_CANCELLED
from coppice.cli.output import (
    Column,
    percent,
    print_fields,
    print_json,
    print_listing,
    print_table,
    when,
)
from coppice.cli.parsing import list_verb, noun, verb
from coppice.client import Client
from coppice.searches import Search, candidate_spaces

if TYPE_CHECKING:
    from coppice.cli.parsing import Subparsers

SEARCH_COLUMNS: list[Column] = [
    ("id", lambda s: s["id"]),
    ("status", lambda s: s["status"]),
    ("progress", lambda s: percent(s["progress"])),
    ("strategy", lambda s: s["strategy"] + (" (auto)" if s["auto"] else "")),
    ("metric", lambda s: s["metric"]),
    ("models", lambda s: s["n_models"]),
    ("created", lambda s: when(s["created_at"])),
    ("best", lambda s: s["best_model_id"]),
]
STATUSES = ["running", "stacking", "succeeded", "failed", "cancelled"]


def _leaderboard_columns(metric: str) -> list[Column]:
    return [
        ("rank", lambda r: r["rank"]),
        ("model", lambda r: r["model_id"]),
        ("method", lambda r: r["method"]),
        (metric, lambda r: r["metric"]["mean"]),
        ("std", lambda r: r["metric"]["std"]),
        ("kind", lambda r: r["kind"]),
        ("fit_s", lambda r: r["fit_seconds"]),
        ("params", _params_text),
    ]


def _params_text(row: dict[str, Any]) -> str:
    """A candidate's drawn parameters as compact JSON; an ensemble's member methods."""
    members = row["params"].get("members") if row["kind"] == "stack" else None
    if members:
        return "members: " + ", ".join(str(member["method"]) for member in members)
    return json.dumps(row["params"], separators=(",", ":"))


def read_candidates(text: str) -> Any:
    """``--candidates``: JSON text, or ``@file.json``; either the API's list of
    ``{"method", "params"}`` or ``{"method": {params}}``."""
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError as error:
        raise ValueError(f"--candidates is not JSON: {error}") from error


def search_start(client: Client, args: argparse.Namespace) -> int:
    candidates = [*candidate_spaces(read_candidates(args.candidates) if args.candidates else [])]
    candidates += [{"method": method} for method in args.method or []]
    search = client.search(
        args.dataset,
        target=args.target,
        candidates=candidates or None,
        auto=args.auto,
        strategy=args.strategy,
        max_models=args.max_models,
        max_seconds=args.max_seconds,
        folds=args.folds,
        metric=args.metric,
        stack=args.stack,
        register_as=args.register_as,
        seed=args.seed,
        task=args.task,
        features=[f.strip() for f in args.features.split(",")] if args.features else None,
        name=args.name,
    )
    if not args.wait:
        return _show_search(search, args)
    # Progress goes to stderr, so that `--json` output on stdout stays parseable. A failed
    # search raises (exit 9); a cancelled one is shown with what finished, then exits 10.
    search.wait(progress=not args.no_progress)
    _show_search(search, args)
    return JOB_CANCELLED if search.status == "cancelled" else 0


def search_list(client: Client, args: argparse.Namespace) -> int:
    page = client.searches(status=args.status, limit=args.limit, offset=args.offset)
    return print_listing([s.info for s in page], page.total, SEARCH_COLUMNS, args)


def search_show(client: Client, args: argparse.Namespace) -> int:
    return _show_search(client.search_by_id(args.id), args)


def search_cancel(client: Client, args: argparse.Namespace) -> int:
    return _show_search(client.search_by_id(args.id).cancel(), args)


def search_leaderboard(client: Client, args: argparse.Namespace) -> int:
    search = client.search_by_id(args.id)
    if args.json:
        print_json(search.info["leaderboard"])
        return 0
    _print_leaderboard(search)
    return 0


def _print_leaderboard(search: Search) -> None:
    print_table(search.info["leaderboard"], _leaderboard_columns(search.metric))


def _show_search(search: Search, args: argparse.Namespace) -> int:
    if args.json:
        print_json(search.info)
        return 0
    info = search.info
    registration = info.get("registration") or {}
    counts = ", ".join(f"{n} {status}" for status, n in search.job_counts.items() if n)
    print_fields(
        {
            "id": info["id"],
            "name": info["name"],
            "status": info["status"],
            "progress": percent(info["progress"]),
            "stage": search.stage,
            "strategy": info["strategy"] + (" (auto)" if info["auto"] else ""),
            "metric": f"{info['metric']} ({info['direction']})",
            "dataset": info["dataset_id"],
            "target": info["target"],
            "task": info["task"],
            "folds": info["folds"],
            "jobs": counts or None,
            "best": info["best_model_id"],
            "ensemble": info["stack_model_id"],
            "registered": _registration(registration) if registration else None,
            "created": when(info["created_at"]),
            "finished": when(info["finished_at"]),
        }
    )
    for note in search.notes:
        print(f"note: {note}")
    if info["leaderboard"]:
        print()
        _print_leaderboard(search)
    return 0


def _registration(registration: dict[str, Any]) -> str:
    if registration["status"] == "registered":
        return f"{registration['name']}@{registration['version']} (alias candidate)"
    return f"{registration['name']}: {registration['status']} {registration.get('detail') or ''}"


def add_parsers(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "search", "hyper-parameter searches and their leaderboards")
    _add_start(actions, common)
    listing = list_verb(
        actions, search_list, "searches", "  coppice search list --status running", common
    )
    listing.add_argument("--status", choices=STATUSES)
    for name, handler, help_text in (
        ("show", search_show, "show a search: progress, best model and leaderboard"),
        ("cancel", search_cancel, "cancel what is left of a search; what finished is kept"),
        ("leaderboard", search_leaderboard, "print a search's leaderboard, best first"),
    ):
        action = verb(actions, name, handler, help_text, f"  coppice search {name} 7c0a...", common)
        action.add_argument("id")


def _add_start(actions: Subparsers, common: argparse.ArgumentParser) -> None:
    start = verb(
        actions,
        "start",
        search_start,
        "start a search over methods and their parameters (--auto: the server chooses)",
        "  coppice search start --dataset 3f2c... --target churned --auto \\\n"
        "      --budget-models 20 --stack --register-as churn --wait\n"
        "  coppice search start --dataset 3f2c... --target churned --strategy grid \\\n"
        '      --candidates \'{"random_forest": {"max_features": ["sqrt", 0.5]}}\'',
        common,
    )
    start.add_argument("--dataset", required=True, help="dataset id")
    start.add_argument("--target", required=True, help="column to predict")
    start.add_argument(
        "--candidates",
        help="methods and spaces as JSON (or @file.json): "
        '{"method": {"param": [choices] | {"int"|"uniform"|"log_uniform": [lo, hi]} | value}}',
    )
    start.add_argument(
        "--method", action="append", help="a method to try at its defaults (repeatable)"
    )
    start.add_argument("--auto", action="store_true", help="let the server choose the methods")
    start.add_argument(
        "--strategy", choices=["random", "grid", "halving"], default="random", help="(random)"
    )
    start.add_argument(
        "--max-models", "--budget-models", type=int, dest="max_models", help="most candidates"
    )
    start.add_argument(
        "--max-seconds",
        "--budget-seconds",
        type=float,
        dest="max_seconds",
        help="wall-clock budget; what finished by then is ranked",
    )
    start.add_argument("--folds", type=int, help="k of the k-fold CV (server default 5)")
    start.add_argument("--metric", help="roc_auc, accuracy, log_loss, f1_macro; rmse, mae, r2")
    start.add_argument("--stack", action="store_true", help="add a stacked ensemble")
    start.add_argument("--register-as", help="register the best model under this name")
    start.add_argument("--seed", type=int)
    start.add_argument(
        "--task", choices=["classification", "regression"], help="default: from the target's kind"
    )
    start.add_argument("--features", help="comma-separated feature columns (default: all)")
    start.add_argument("--name", help="search name")
    start.add_argument("--wait", action="store_true", help="wait for the leaderboard")
    start.add_argument("--no-progress", action="store_true", help="with --wait: no progress bar")
