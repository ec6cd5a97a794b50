"""What each client verb of the ``coppice`` command does, on a :class:`~coppice.Client`.

Every handler prints either for people (tables, ``name value`` lines) or, with ``--json``,
the server's JSON unchanged, and returns the process exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coppice.cli.output import (
    Column,
    percent,
    print_fields,
    print_json,
    print_listing,
    print_table,
    when,
)
from coppice.cli.predict import predict_csv
from coppice.client import Client
from coppice.jobs import Job
from coppice.models import Model

DATASET_COLUMNS: list[Column] = [
    ("id", lambda d: d["id"]),
    ("name", lambda d: d["name"]),
    ("rows", lambda d: d["n_rows"]),
    ("columns", lambda d: d["n_columns"]),
    ("created", lambda d: when(d["created_at"])),
]
JOB_COLUMNS: list[Column] = [
    ("id", lambda j: j["id"]),
    ("status", lambda j: j["status"]),
    ("progress", lambda j: percent(j["progress"])),
    ("method", lambda j: j["method"]),
    ("created", lambda j: when(j["created_at"])),
    ("stage", lambda j: j["stage"]),
]
MODEL_COLUMNS: list[Column] = [
    ("id", lambda m: m["id"]),
    ("method", lambda m: m["method"]),
    ("task", lambda m: m["task"]),
    ("target", lambda m: m["target"]),
    ("created", lambda m: when(m["created_at"])),
    ("name", lambda m: m["name"]),
]


def datasets_upload(client: Client, args: argparse.Namespace) -> int:
    categorical = [c.strip() for c in args.categorical.split(",")] if args.categorical else None
    dataset = client.upload(Path(args.file), name=args.name, categorical=categorical)
    return _show_dataset(dataset.info, args)


def datasets_list(client: Client, args: argparse.Namespace) -> int:
    page = client.datasets(limit=args.limit, offset=args.offset)
    return print_listing([d.info for d in page], page.total, DATASET_COLUMNS, args)


def datasets_show(client: Client, args: argparse.Namespace) -> int:
    return _show_dataset(client.dataset(args.id).info, args)


def datasets_register(client: Client, args: argparse.Namespace) -> int:
    categorical = [c.strip() for c in args.categorical.split(",")] if args.categorical else None
    dataset = client.register_table(args.url, name=args.name, categorical=categorical)
    return _show_dataset(dataset.info, args)


def datasets_download(client: Client, args: argparse.Namespace) -> int:
    path = client.dataset(args.id).download(args.output, format=args.format)
    if args.json:
        print_json({"id": args.id, "path": str(path), "bytes": path.stat().st_size})
    else:
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


def _show_dataset(info: dict[str, Any], args: argparse.Namespace) -> int:
    if args.json:
        print_json(info)
        return 0
    print_fields(
        {
            "id": info["id"],
            "name": info["name"],
            "rows": info["n_rows"],
            "columns": info["n_columns"],
            "created": when(info["created_at"]),
            "storage": _storage_text(info.get("storage")),
        }
    )
    print()
    print_table(
        info["columns"],
        [
            ("column", lambda c: c["name"]),
            ("kind", lambda c: c["kind"]),
            ("missing", lambda c: c["n_missing"]),
            ("unique", lambda c: c["n_unique"]),
        ],
    )
    return 0


def _storage_text(storage: dict[str, Any] | None) -> str:
    if not storage:
        return "-"
    where = "registered" + (f" at {storage['url']}" if storage.get("url") else "")
    if not storage.get("registered"):
        where = "in the data store"
    return f"{storage['n_parts']} Parquet part(s), {storage['bytes']} bytes, {where}"


def methods_list(client: Client, args: argparse.Namespace) -> int:
    methods = client.methods()
    if args.json:
        print_json(methods)
        return 0
    print_table(
        methods,
        [
            ("method", lambda m: m["name"]),
            ("tasks", lambda m: ", ".join(m["tasks"])),
            ("description", lambda m: m["description"].split(". ")[0]),
        ],
    )
    return 0


def train(client: Client, args: argparse.Namespace) -> int:
    validation = None
    if args.folds is not None:
        validation = {"folds": args.folds}
    elif args.holdout is not None:
        validation = {"holdout": args.holdout}
    job = client.train(
        args.dataset,
        target=args.target,
        method=args.method,
        params=dict(args.param or []),
        validation=validation,
        task=args.task,
        features=[f.strip() for f in args.features.split(",")] if args.features else None,
        seed=args.seed,
        name=args.name,
    )
    if not args.wait:
        return _show_job(job, args)
    return _wait_and_show(job, args)


def _wait_and_show(job: Job, args: argparse.Namespace) -> int:
    # Progress goes to stderr, so that `--json` output on stdout stays parseable.
    model = job.wait(progress=not args.no_progress)
    return _show_model(model, args)


def jobs_list(client: Client, args: argparse.Namespace) -> int:
    page = client.jobs(status=args.status, limit=args.limit, offset=args.offset)
    return print_listing([j.info for j in page], page.total, JOB_COLUMNS, args)


def jobs_show(client: Client, args: argparse.Namespace) -> int:
    return _show_job(client.job(args.id), args)


def jobs_cancel(client: Client, args: argparse.Namespace) -> int:
    return _show_job(client.job(args.id).cancel(), args)


def jobs_wait(client: Client, args: argparse.Namespace) -> int:
    return _wait_and_show(client.job(args.id), args)


def _show_job(job: Job, args: argparse.Namespace) -> int:
    if args.json:
        print_json(job.info)
        return 0
    info = job.info
    error = info.get("error") or {}
    fields = {
        "id": info["id"],
        "status": info["status"] + (" (cancel requested)" if info.get("cancel_requested") else ""),
        "progress": percent(info["progress"]),
        "stage": info["stage"],
        "method": info["method"],
        "task": info["task"],
        "dataset": info["dataset_id"],
        "model": info["model_id"],
        "attempts": info["attempts"],
        "created": when(info["created_at"]),
        "started": when(info["started_at"]),
        "finished": when(info["finished_at"]),
    }
    if error:
        fields["error"] = f"{error.get('code')}: {error.get('message')}"
    print_fields(fields)
    return 0


def models_list(client: Client, args: argparse.Namespace) -> int:
    page = client.models(method=args.method, limit=args.limit, offset=args.offset)
    return print_listing([m.info for m in page], page.total, MODEL_COLUMNS, args)


def models_show(client: Client, args: argparse.Namespace) -> int:
    return _show_model(client.model(args.ref), args)


def _column(name: str) -> Column:
    return (name, lambda row: row[name])


MONITOR_COLUMNS = [
    _column(name) for name in ("feature", "kind", "psi", "drift", "missing", "unseen")
]


def models_monitor(client: Client, args: argparse.Namespace) -> int:
    report = client.model(args.ref).monitoring(since=args.since, until=args.until)
    if args.json:
        print_json(report)
        return 0
    window = report["window"]
    print_fields(
        {
            "model": report["model_id"],
            "window": f"{when(window['since'])} – {when(window['until'])}",
            "predictions": report["n_predictions"],
            "labelled": report["performance"].get("n_labelled", 0),
        }
    )
    if report.get("note"):
        print(report["note"])
    rows = [
        {
            "feature": f["name"],
            "kind": f["kind"],
            "psi": "—" if f["psi"] is None else f"{f['psi']:.3f}",
            "drift": f["drift"] or "—",
            "missing": percent(f["missing_rate"]["live"]),
            "unseen": "" if f["unseen"] is None else f["unseen"]["count"],
        }
        for f in report["features"]
    ]
    if report.get("prediction"):
        p = report["prediction"]
        psi = "—" if p["psi"] is None else f"{p['psi']:.3f}"
        rows.append({"feature": "(prediction)", "kind": "", "psi": psi,
                     "drift": p["drift"] or "—", "missing": "", "unseen": ""})  # fmt: skip
    if rows:
        print()
        print_table(rows, MONITOR_COLUMNS)
    scores = {
        k: v
        for k, v in report["performance"].items()
        if k not in ("n_labelled", "confusion_matrix")
    }
    if scores:
        print()
        print_fields(scores)
    return 0


def models_export(client: Client, args: argparse.Namespace) -> int:
    model = client.model(args.ref)
    suffix = ".zip" if args.format == "triton" else ".onnx"
    output = args.output or Path(f"coppice-{model.id}{suffix}")
    data = model.export(args.format, output)
    if args.json:
        print_json(
            {"model_id": model.id, "format": args.format, "path": str(output), "bytes": len(data)}
        )
    else:
        print(f"wrote {output} ({args.format}, {len(data):,} bytes) from model {model.id}")
    return 0


def _show_model(model: Model, args: argparse.Namespace) -> int:
    if args.json:
        print_json(model.info)
        return 0
    info = model.info
    print_fields(
        {
            "id": info["id"],
            "name": info["name"],
            "registered": _registered(model),
            "method": info["method"],
            "task": info["task"],
            "target": info["target"],
            "features": ", ".join(model.features),
            "classes": ", ".join(model.classes) if model.classes else None,
            "estimators": info.get("n_estimators"),
            "importance": ", ".join(model.importance_kinds or []) or None,
            "size": f"{info['size_bytes']} bytes",
            "job": info["job_id"],
            "created": when(info["created_at"]),
        }
    )
    metrics = {split: values for split, values in model.metrics.items() if values and split != "cv"}
    names = sorted({name for values in metrics.values() for name in values} - {"confusion_matrix"})
    cv = model.metrics.get("cv") or {}
    if metrics or cv:
        print()
        rows = [
            {"metric": name}
            | {split: values.get(name) for split, values in metrics.items()}
            | ({"cv": _mean_std(cv.get(name))} if cv else {})
            for name in sorted(set(names) | set(cv))
        ]
        splits = [*metrics, *(["cv"] if cv else [])]
        columns: list[Column] = [("metric", lambda r: r["metric"])]
        columns += [(split, _reader(split)) for split in splits]
        print_table(rows, columns)
    return 0


def _registered(model: Model) -> str | None:
    """``churn@3 (churn@production)``: the version a reference resolved to, and the reference."""
    version = model.registered_version
    if version is None:
        return None
    asked = f" ({model.ref})" if model.ref and model.ref != version.ref else ""
    return version.ref + asked


def _reader(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda row: row.get(key)


def _mean_std(value: Any) -> str | None:
    if not value:
        return None
    return f"{value['mean']:.4g} ± {value['std']:.2g}"


def importance(client: Client, args: argparse.Namespace) -> int:
    model = client.model(args.model)
    # The raw answer rather than model.feature_importance(): no pandas needed for a table.
    answer = model.importance_answer(args.kind)
    if args.json:
        print_json(answer)
        return 0
    print(f"{answer['kind']} importance of model {answer['model_id']}", file=sys.stderr)
    print_table(
        answer["features"],
        [
            ("feature", lambda f: f["name"]),
            ("importance", lambda f: f["importance"]),
            ("std", lambda f: f["std"]),
        ],
    )
    return 0


def predict(client: Client, args: argparse.Namespace) -> int:
    out_path: Path | None = args.output
    with contextlib.ExitStack() as files:
        out = sys.stdout
        if out_path is not None:
            out = files.enter_context(out_path.open("w", newline="", encoding="utf-8"))
        count = predict_csv(
            client,
            args.model,
            args.file,
            out,
            proba=args.proba,
            batch_size=args.batch,
            as_json=args.json,
        )
    print(f"{count} rows predicted", file=sys.stderr)
    return 0


def parse_param(text: str) -> tuple[str, Any]:
    """``k=v`` with ``v`` read as JSON when it is JSON (``100``, ``0.5``, ``null``,
    ``{"method": ...}``), else kept as text (``sqrt``)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value
