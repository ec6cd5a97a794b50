"""``coppice batch ...``: score a stored dataset with a model as a job; list, show, wait for
and cancel batch predictions, and download what they wrote."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from coppice.batch import BatchPrediction
from coppice.cli.output import Column, percent, print_fields, print_json, print_listing, when
from coppice.cli.parsing import list_verb, noun, verb
from coppice.client import Client

if TYPE_CHECKING:
    from coppice.cli.parsing import Subparsers

BATCH_COLUMNS: list[Column] = [
    ("id", lambda b: b["id"]),
    ("status", lambda b: b["status"]),
    ("progress", lambda b: percent(b["progress"])),
    ("model", lambda b: b["model"]),
    ("rows", lambda b: b["n_rows"]),
    ("created", lambda b: when(b["created_at"])),
    ("output", lambda b: b["output_dataset_id"]),
]
STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"]


def batch_start(client: Client, args: argparse.Namespace) -> int:
    batch = client.batch_predict(
        args.model,
        args.dataset,
        keep_columns=[c.strip() for c in args.keep.split(",")] if args.keep else (),
        return_proba=args.proba,
        explain=args.explain,
        name=args.name,
    )
    if not args.wait:
        return _show(batch, args)
    return _wait_and_show(batch, args)


def batch_list(client: Client, args: argparse.Namespace) -> int:
    page = client.batch_predictions(
        status=args.status, model_id=args.model, limit=args.limit, offset=args.offset
    )
    return print_listing([b.info for b in page], page.total, BATCH_COLUMNS, args)


def batch_show(client: Client, args: argparse.Namespace) -> int:
    return _show(client.batch_prediction(args.id), args)


def batch_cancel(client: Client, args: argparse.Namespace) -> int:
    return _show(client.batch_prediction(args.id).cancel(), args)


def batch_wait(client: Client, args: argparse.Namespace) -> int:
    return _wait_and_show(client.batch_prediction(args.id), args)


def _wait_and_show(batch: BatchPrediction, args: argparse.Namespace) -> int:
    # Progress on stderr keeps `--json` on stdout parseable; a failed or cancelled batch
    # raises, and main() turns that into its exit code (9 or 10).
    output = batch.wait(progress=not args.no_progress)
    if args.out:
        output.download(Path(args.out))
    return _show(batch, args)


def _show(batch: BatchPrediction, args: argparse.Namespace) -> int:
    if args.json:
        print_json(batch.info)
        return 0
    info = batch.info
    error = info.get("error") or {}
    fields = {
        "id": info["id"],
        "status": info["status"] + (" (cancel requested)" if info.get("cancel_requested") else ""),
        "progress": percent(info["progress"]),
        "stage": info["stage"],
        "model": f"{info['model']} ({info['model_id']})"
        if info["model"] != info["model_id"]
        else info["model"],
        "dataset": info["dataset_id"],
        "rows": info["n_rows"],
        "output": info["output_dataset_id"],
        "attempts": info["attempts"],
        "created": when(info["created_at"]),
        "finished": when(info["finished_at"]),
    }
    if error:
        fields["error"] = f"{error.get('code')}: {error.get('message')}"
    print_fields(fields)
    for name, value in (info.get("metrics") or {}).items():
        if name != "confusion_matrix":
            print(f"metric {name}: {value}")
    for note in info.get("notes") or []:
        print(f"note: {note}")
    return 0


def add_parsers(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "batch", "batch predictions: score a stored dataset as a job")
    start = verb(
        actions,
        "start",
        batch_start,
        "score a stored dataset with a model; the output is a new dataset",
        "  coppice batch start churn@production 3f2c... --keep customer_id --proba \\\n"
        "      --wait --out scored.parquet",
        common,
    )
    start.add_argument("model", help="model id, or name@alias / name@N")
    start.add_argument("dataset", help="dataset id")
    start.add_argument("--keep", help="comma-separated columns copied into the output")
    start.add_argument("--proba", action="store_true", help="one proba_<class> column per class")
    start.add_argument(
        "--explain", action="store_true", help="contribution_<feature> columns and bias"
    )
    start.add_argument("--name", help="the output dataset's name")
    start.add_argument("--wait", action="store_true", help="wait for it to end")
    start.add_argument("--no-progress", action="store_true", help="no progress bar")
    start.add_argument("--out", help="with --wait: download the output (.parquet or .csv)")
    listing = list_verb(
        actions, batch_list, "batch predictions", "  coppice batch list --status running", common
    )
    listing.add_argument("--status", choices=STATUSES)
    listing.add_argument("--model", help="only this model id's")
    for name, handler, help_text in (
        ("show", batch_show, "show a batch prediction: status, rows, output, metrics, notes"),
        ("cancel", batch_cancel, "cancel a queued or running batch prediction"),
        ("wait", batch_wait, "wait for a batch prediction to end, then show it"),
    ):
        action = verb(actions, name, handler, help_text, f"  coppice batch {name} 5b7d...", common)
        action.add_argument("id")
        if name == "wait":
            action.add_argument("--no-progress", action="store_true", help="no progress bar")
            action.add_argument("--out", help="download the output (.parquet or .csv)")
