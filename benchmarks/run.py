"""Fit and predict the engine's forests beside scikit-learn, LightGBM and XGBoost, in one run.

    python -m benchmarks.run [--quick] [--repeats N] [--only PATTERN] [--output PATH]
                             [--peers lightgbm,xgboost|none] [--scaling [--scaling-1m]]

For every (family, dataset) the libraries run in turn — ours, scikit-learn, the other peers —
and that round is repeated, so each library's runs are interleaved with the others' on a noisy
machine. Each run is a fresh process (see ``benchmarks.measure``). The results go to a JSON
file (and a markdown copy beside it); the markdown tables go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.datasets import DATASETS, DatasetFiles, DatasetSpec, write_dataset
from benchmarks.machine import describe_machine
from benchmarks.measure import RunJob, measure_run
from benchmarks.models import COMPARISONS, BuildContext, Comparison
from benchmarks.progress import log
from benchmarks.report import (
    ModelSummary,
    ScalingSummary,
    render_report,
    summarise_comparison,
    summarise_scaling,
)
from benchmarks.scaling import SCALING_MODEL, default_sizes, run_scaling

RESULTS_DIR = Path(__file__).resolve().parent / "results"
QUICK_ROWS = 10_000
EXTRA_PEERS = ("lightgbm", "xgboost")


@dataclass(frozen=True)
class Settings:
    """The knobs of one run, recorded in the results."""

    quick: bool
    repeats: int
    n_estimators: int
    n_jobs: int
    only: str | None
    peers: tuple[str, ...]
    latency_calls: int
    latency_warmup: int
    sample_interval_s: float
    timeout_s: float | None
    compare: bool
    scaling_sizes: tuple[int, ...]
    scaling_repeats: int


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: datasets cut to {QUICK_ROWS:,} rows, 10 trees, 1 repeat, 50 latency calls",
    )
    parser.add_argument("--repeats", type=int, help="runs per library and dataset (default 3)")
    parser.add_argument("--trees", type=int, help="n_estimators for every model (default 100)")
    parser.add_argument("--n-jobs", type=int, default=2, help="n_jobs / threads (default 2)")
    parser.add_argument(
        "--only",
        metavar="PATTERN",
        help="run only the comparisons whose 'family/dataset' matches this glob "
        "(a plain word matches as a substring), e.g. 'random_forest/*' or 'friedman'",
    )
    parser.add_argument(
        "--peers",
        default=",".join(EXTRA_PEERS),
        help="extra peers beside scikit-learn, comma-separated, or 'none' (default: %(default)s)",
    )
    parser.add_argument("--output", type=Path, help="results JSON (default benchmarks/results/)")
    parser.add_argument(
        "--timeout", type=float, help="seconds after which one run is killed and marked failed"
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=0.05,
        help="least seconds between memory samples of a fitting process tree; the wait grows "
        "so that sampling takes at most 10%% of one core (default %(default)s)",
    )
    parser.add_argument(
        "--scaling", action="store_true", help="also run the scaling study (10k and 100k rows)"
    )
    parser.add_argument(
        "--scaling-1m", action="store_true", help="add 1M rows to the scaling study (slow)"
    )
    parser.add_argument(
        "--scaling-only", action="store_true", help="run the scaling study and skip the comparison"
    )
    args = parser.parse_args(argv)

    peers = () if args.peers.strip() == "none" else tuple(p.strip() for p in args.peers.split(","))
    unknown = set(peers) - set(EXTRA_PEERS)
    if unknown:
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}; known: {EXTRA_PEERS}")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    scaling = args.scaling or args.scaling_1m or args.scaling_only
    settings = Settings(
        quick=args.quick,
        repeats=repeats,
        n_estimators=args.trees or (10 if args.quick else 100),
        n_jobs=args.n_jobs,
        only=args.only,
        peers=peers,
        latency_calls=50 if args.quick else 200,
        latency_warmup=5 if args.quick else 20,
        sample_interval_s=args.sample_interval,
        timeout_s=args.timeout,
        compare=not args.scaling_only,
        scaling_sizes=(
            default_sizes(quick=args.quick, include_million=args.scaling_1m) if scaling else ()
        ),
        # There is no peer to interleave with, and the 1M fit is long: one run per size.
        scaling_repeats=1,
    )
    default_name = "forests-quick.json" if args.quick else "forests.json"
    return settings, args.output or RESULTS_DIR / default_name


def _matches(pattern: str | None, name: str) -> bool:
    if pattern is None:
        return True
    if not any(char in pattern for char in "*?["):
        pattern = f"*{pattern}*"
    return fnmatch.fnmatch(name, pattern)


def _datasets(settings: Settings) -> tuple[DatasetSpec, ...]:
    if not settings.quick:
        return DATASETS
    return tuple(spec.with_samples(min(spec.n_samples, QUICK_ROWS)) for spec in DATASETS)


def _plan(settings: Settings) -> list[tuple[Comparison, DatasetSpec]]:
    return [
        (comparison, spec)
        for spec in _datasets(settings)
        for comparison in COMPARISONS
        if _matches(settings.only, f"{comparison.family}/{spec.name}")
    ]


def run_comparisons(
    settings: Settings,
    workdir: Path,
    checkpoint: Callable[[list[dict[str, Any]]], None] = lambda runs: None,
) -> tuple[list[dict[str, Any]], list[DatasetFiles]]:
    """Every planned (family, dataset), each library interleaved with the others per repeat.

    ``checkpoint`` receives the runs so far after every run.
    """
    plan = _plan(settings)
    if not plan:
        log(f"--only {settings.only!r} matches no comparison")
    written: dict[str, DatasetFiles] = {}
    peers = frozenset(settings.peers)
    total = sum(len(c.models(peers)) for c, _ in plan) * settings.repeats
    runs: list[dict[str, Any]] = []
    for comparison, spec in plan:
        if spec.name not in written:
            written[spec.name] = write_dataset(spec, workdir)
        files = written[spec.name]
        context = BuildContext(
            task=spec.task,
            n_features=spec.n_features,
            n_train=files.n_train,
            n_estimators=settings.n_estimators,
            n_jobs=settings.n_jobs,
            random_state=0,
        )
        for repeat in range(settings.repeats):
            # ours, scikit-learn, peers; ours, scikit-learn, peers; ...
            for model in comparison.models(peers):
                job = RunJob(
                    model,
                    context,
                    files,
                    latency_calls=settings.latency_calls,
                    latency_warmup=settings.latency_warmup,
                )
                result = measure_run(
                    job, sample_interval=settings.sample_interval_s, timeout=settings.timeout_s
                )
                runs.append(
                    {
                        "family": comparison.family,
                        "dataset": spec.name,
                        "repeat": repeat,
                        **result.to_record(),
                    }
                )
                checkpoint(runs)
                log(
                    f"[{len(runs)}/{total}] {comparison.family}/{spec.name} {model.library} "
                    f"repeat {repeat + 1}/{settings.repeats}: {result.outcome()}"
                )
    return runs, list(written.values())


def _describe_models(settings: Settings) -> list[dict[str, str]]:
    peers = frozenset(settings.peers)
    planned = (
        {comparison.family for comparison, _ in _plan(settings)} if settings.compare else set()
    )
    described = [
        {"family": comparison.family, "library": model.library, "settings": model.settings}
        for comparison in COMPARISONS
        if comparison.family in planned
        for model in comparison.models(peers)
    ]
    if settings.scaling_sizes:
        described.append(
            {"family": "scaling", "library": "coppice", "settings": SCALING_MODEL.settings}
        )
    return described


def _payload(
    settings: Settings,
    machine: dict[str, Any],
    files: Sequence[DatasetFiles],
    runs: list[dict[str, Any]],
    summary: Sequence[ModelSummary],
    scaling_runs: list[dict[str, Any]],
    scaling: Sequence[ScalingSummary],
    wall_time_s: float,
) -> dict[str, Any]:
    """Everything the JSON file holds."""
    return {
        "benchmark": "forests",
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": ["python", "-m", "benchmarks.run", *sys.argv[1:]],
        "settings": asdict(settings),
        "machine": machine,
        "datasets": [
            {
                "name": f.spec.name,
                "task": f.spec.task,
                "description": f.spec.describe(),
                "n_train": f.n_train,
                "n_test": f.n_test,
            }
            for f in files
        ],
        "models": _describe_models(settings),
        "runs": runs,
        "summary": [asdict(s) for s in summary],
        "scaling": {
            "runs": scaling_runs,
            "summary": [
                {**asdict(s), "us_per_row": s.us_per_row, "within_2gib": s.within_2gib}
                for s in scaling
            ],
        },
        "wall_time_s": wall_time_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    settings, output = parse_args(argv)
    started = time.monotonic()
    machine = describe_machine()
    log(f"machine: {machine['cpu']}, {machine['usable_cpus']} CPUs; settings: {settings}")
    # A full run takes hours; every finished run is saved at once, so an interrupted one
    # keeps what it measured.
    partial = output.with_suffix(".partial.json")
    output.parent.mkdir(parents=True, exist_ok=True)

    def checkpoint(runs: list[dict[str, Any]]) -> None:
        partial.write_text(json.dumps({"settings": asdict(settings), "runs": runs}) + "\n")

    runs: list[dict[str, Any]] = []
    files: list[DatasetFiles] = []
    scaling_runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="coppice-bench-") as tmp:
        workdir = Path(tmp)
        if settings.compare:
            runs, files = run_comparisons(settings, workdir, checkpoint)
        if settings.scaling_sizes:
            scaling_runs = run_scaling(
                settings.scaling_sizes,
                repeats=settings.scaling_repeats,
                n_estimators=settings.n_estimators,
                n_jobs=settings.n_jobs,
                workdir=workdir,
                sample_interval=settings.sample_interval_s,
                timeout=settings.timeout_s,
                log=log,
            )
    summary = summarise_comparison(runs)
    scaling = summarise_scaling(scaling_runs)
    wall_time_s = time.monotonic() - started
    payload = _payload(settings, machine, files, runs, summary, scaling_runs, scaling, wall_time_s)
    markdown = render_report(payload, summary, scaling)
    output.write_text(json.dumps(payload, indent=2) + "\n")
    output.with_suffix(".md").write_text(markdown)
    partial.unlink(missing_ok=True)
    log(f"wrote {output} and {output.with_suffix('.md')}")
    sys.stdout.write(markdown)
    failed = sum(1 for run in runs + scaling_runs if run["error"] is not None)
    return 1 if failed else 0


if __name__ == "__main__":
    # The guard is required: the measured children are started with "spawn", which imports
    # this module again in every child.
    sys.exit(main())
