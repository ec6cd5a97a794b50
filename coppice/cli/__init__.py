"""The ``coppice`` command: the client's verbs, and the server's ``serve | worker | migrate |
store``.

The server's commands are handed to :mod:`service.cli`, imported only then: the client verbs
need httpx and NumPy alone, so they work where only ``coppice[client]`` is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from coppice.cli import batch, commands, registry, searches
from coppice.cli.exits import EXIT_CODES_HELP, INTERRUPTED, STDOUT_CLOSED, exit_code_of
from coppice.cli.parsing import Handler, common_options, list_verb, noun, verb
from coppice.client import Client

if TYPE_CHECKING:
    from coppice.cli.parsing import Subparsers

SERVER_COMMANDS = {
    "serve": "migrate the database, then serve the HTTP API (with a training worker)",
    "worker": "run training jobs from the queue",
    "migrate": "upgrade the database to the newest schema",
    "store": "look after the data store (store gc: sweep objects no row names)",
}


def _add_datasets(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "datasets", "upload, register, list, show and download datasets")
    upload = verb(
        actions,
        "upload",
        commands.datasets_upload,
        "upload a CSV, Parquet or Arrow file (streamed)",
        "  coppice datasets upload churn.csv --name churn --categorical plan,region\n"
        "  coppice datasets upload events.parquet",
        common,
    )
    upload.add_argument(
        "file", type=Path, help="CSV with a header row, Parquet (.parquet) or Arrow (.arrow)"
    )
    upload.add_argument("--name", help="dataset name (default: the file name)")
    upload.add_argument("--categorical", help="comma-separated columns to keep as categories")
    list_verb(
        actions,
        commands.datasets_list,
        "datasets",
        "  coppice datasets list\n  coppice datasets list --json | jq '.items[].id'",
        common,
    )
    show = verb(
        actions,
        "show",
        commands.datasets_show,
        "show a dataset and its columns",
        "  coppice datasets show 3f2c...",
        common,
    )
    show.add_argument("id")
    register = verb(
        actions,
        "register",
        commands.datasets_register,
        "register a Parquet file or directory where it lies (admin key; not copied)",
        "  coppice datasets register s3://lake/events/ --name events",
        common,
    )
    register.add_argument("url", help="Parquet file or directory under COPPICE_IMPORT_ROOTS")
    register.add_argument("--name", help="dataset name")
    register.add_argument("--categorical", help="comma-separated columns to keep as categories")
    download = verb(
        actions,
        "download",
        commands.datasets_download,
        "download a dataset as Parquet or CSV (streamed)",
        "  coppice datasets download 3f2c... -o churn.parquet\n"
        "  coppice datasets download 3f2c... -o churn.csv",
        common,
    )
    download.add_argument("id")
    download.add_argument(
        "-o", "--output", type=Path, required=True, help="file to write (.parquet or .csv)"
    )
    download.add_argument(
        "--format", choices=["parquet", "csv"], help="default: from the file's suffix"
    )


def _add_train(top: Subparsers, common: argparse.ArgumentParser) -> None:
    train = verb(
        top,
        "train",
        commands.train,
        "start a training job (and wait for it with --wait)",
        "  coppice train --dataset 3f2c... --target churned --method random_forest \\\n"
        "      --param n_estimators=200 --param max_features=sqrt --wait\n"
        "  coppice train --dataset 3f2c... --target price --method xgboost --folds 5 --json",
        common,
    )
    train.add_argument("--dataset", required=True, help="dataset id")
    train.add_argument("--target", required=True, help="column to predict")
    train.add_argument("--method", required=True, help="method name (see `coppice methods`)")
    train.add_argument(
        "--param",
        action="append",
        type=commands.parse_param,
        metavar="K=V",
        help="a hyperparameter; V is read as JSON when it is JSON (repeatable)",
    )
    train.add_argument(
        "--task", choices=["classification", "regression"], help="default: from the target's kind"
    )
    train.add_argument("--features", help="comma-separated feature columns (default: all)")
    split = train.add_mutually_exclusive_group()
    split.add_argument("--holdout", type=float, help="validation share (server default 0.2)")
    split.add_argument("--folds", type=int, help="k-fold cross-validation instead")
    train.add_argument("--seed", type=int)
    train.add_argument("--name", help="job (and model) name")
    train.add_argument("--wait", action="store_true", help="wait for the model, showing progress")
    train.add_argument("--no-progress", action="store_true", help="with --wait: no progress bar")


def _add_jobs(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "jobs", "list, show, wait for and cancel jobs")
    listing = list_verb(
        actions, commands.jobs_list, "jobs", "  coppice jobs list --status running", common
    )
    listing.add_argument(
        "--status", choices=["queued", "running", "succeeded", "failed", "cancelled"]
    )
    for name, handler, help_text in (
        ("show", commands.jobs_show, "show a job: status, progress, stage, model"),
        ("cancel", commands.jobs_cancel, "cancel a queued or running job"),
        ("wait", commands.jobs_wait, "wait for a job to end, then show its model"),
    ):
        action = verb(actions, name, handler, help_text, f"  coppice jobs {name} 9a1e...", common)
        action.add_argument("id")
        if name == "wait":
            action.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_models(top: Subparsers, common: argparse.ArgumentParser) -> None:
    actions = noun(top, "models", "list, show and export models")
    listing = list_verb(
        actions, commands.models_list, "models", "  coppice models list --method xgboost", common
    )
    listing.add_argument("--method", help="only this method's models")
    show = verb(
        actions,
        "show",
        commands.models_show,
        "show a model and its metrics",
        "  coppice models show 5b7d...\n  coppice models show churn@production --json",
        common,
    )
    show.add_argument("ref", help="model id, or name@alias / name@N")
    export = verb(
        actions,
        "export",
        commands.models_export,
        "download a model as ONNX, or as a Triton model repository (zip)",
        "  coppice models export 5b7d... --format onnx -o churn.onnx\n"
        "  coppice models export churn@production --format triton -o churn.zip",
        common,
    )
    export.add_argument("ref", help="model id, or name@alias / name@N")
    export.add_argument("--format", choices=["onnx", "triton"], default="onnx")
    monitor = verb(
        actions,
        "monitor",
        commands.models_monitor,
        "drift of the logged predictions against training, and performance on feedback",
        "  coppice models monitor churn@production\n"
        "  coppice models monitor 5b7d... --since 2026-11-27T00:00:00Z --json",
        common,
    )
    monitor.add_argument("ref", help="model id, or name@alias / name@N")
    monitor.add_argument("--since", help="window start, ISO 8601 (default: 24 h before until)")
    monitor.add_argument("--until", help="window end, ISO 8601 (default: now)")
    export.add_argument(
        "-o", "--output", type=Path, help="file to write (default: coppice-<id>.onnx or .zip)"
    )


def _add_serving(top: Subparsers, common: argparse.ArgumentParser) -> None:
    predict = verb(
        top,
        "predict",
        commands.predict,
        "predict every row of a CSV file; CSV out (--json: a JSON object per line)",
        "  coppice predict 5b7d... new_customers.csv > predictions.csv\n"
        "  coppice predict churn@production rows.csv --proba --output scored.csv",
        common,
    )
    predict.add_argument("model", help="model id, or name@alias / name@N")
    predict.add_argument("file", type=Path, help="CSV file with the features as columns")
    predict.add_argument("--proba", action="store_true", help="add a probability per class")
    predict.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    predict.add_argument("--batch", type=int, default=10_000, help="rows per request")
    imp = verb(
        top,
        "importance",
        commands.importance,
        "feature importances of a model",
        "  coppice importance 5b7d... --kind shap\n  coppice importance 5b7d... --json",
        common,
    )
    imp.add_argument("model", help="model id, or name@alias / name@N")
    imp.add_argument(
        "--kind",
        help="impurity, permutation, oob_permutation, gain, "
        "split_count, cover or shap (default: the method's)",
    )
    verb(
        top,
        "methods",
        commands.methods_list,
        "list the trainable methods",
        "  coppice methods\n  coppice methods --json | jq '.[0].params_schema'",
        common,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coppice",
        description="Coppice: train and serve ensemble models over HTTP. The client verbs "
        "talk to a server (COPPICE_URL, COPPICE_API_KEY); serve, worker and migrate run one.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    _add_datasets(top, common)
    _add_train(top, common)
    _add_jobs(top, common)
    _add_models(top, common)
    _add_serving(top, common)
    registry.add_parsers(top, common)
    searches.add_parsers(top, common)
    batch.add_parsers(top, common)
    for name, help_text in SERVER_COMMANDS.items():
        # Listed here for --help; `main` hands them to service.cli before parsing.
        top.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coppice`` console script; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in SERVER_COMMANDS:
        from service.cli import main as service_main

        return service_main(arguments)
    args = build_parser().parse_args(arguments)
    handler: Handler = args.handler
    try:
        with Client(args.url, args.api_key) as client:
            return handler(client, args)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`coppice predict ... | head`): stop quietly, as a shell
        # command killed by SIGPIPE would, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return STDOUT_CLOSED
    except Exception as error:
        code = exit_code_of(error)
        if code is None:
            raise
        print(f"coppice: {error}", file=sys.stderr)
        return code
