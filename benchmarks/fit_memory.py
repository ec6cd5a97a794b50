"""A fit process's peak memory: training from a dataset's parts against from its columns in memory.

    python -m benchmarks.fit_memory [--rows 2000000] [--features 20]
                                   [--method xgboost|gradient_boosting|random_forest] [--phases]

Writes a table of ``--rows`` × ``--features`` (standard normal numbers, the last feature a
categorical of eight strings, a two-class target) as the service's Parquet parts in a temporary
local store (``PartWriter``'s own layout: 2^17-row row groups, parts of about 128 MiB), then runs
the same job twice, each in a fresh Python process that first fits the same method on 2,000 rows
(imports, compiled kernels, allocator arenas: the process's baseline), resets its resident
high-water mark (``/proc/self/clear_refs``) and reads its RSS, then:

- ``parts``: ``run_training`` on a ``PartTable``, as the fit process does for a histogram method
  (the binned matrix built part by part, row group by row group);
- ``memory``: ``run_training`` on the columns read whole (``read_columns``), the path of every
  method before, and of the methods that need the float table now.

Prints, per path, the growth of the peak (``VmHWM`` minus the baseline RSS), the wall and CPU
seconds, and the figures the target is stated in: the binned matrix (rows × features bytes), one
part (its stored bytes and its features as float64), and the float table. The two fits'
artifacts are compared by SHA-256 (they must be equal). ``--phases``: the fit from parts also
reports which step its RSS grew in (``PhaseSampler``: reading the parts' targets, the split,
gathering the binning sample, binning, growing trees, …), the lowest and highest of each. Target (issue 23): the fit from parts
grows by at most the binned matrix plus one part.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.process_memory import PhaseSampler, status_bytes

CATEGORIES = ["amber", "blue", "coral", "denim", "ebony", "fern", "gold", "hazel"]
WARM_ROWS = 2_000


def _spec(method: str, features: list[str]) -> Any:
    from service.training import TrainingSpec

    params: dict[str, Any] = {
        "xgboost": {"n_estimators": 10, "max_depth": 6},
        "gradient_boosting": {"n_estimators": 10, "max_depth": 3},
        "random_forest": {"n_estimators": 4, "max_depth": 12},
    }[method]
    return TrainingSpec(
        method=method,
        task="classification",
        target="label",
        features=tuple(features),
        params=params,
        validation={"holdout": 0.2},
        seed=1,
    )


def _batch(rng: np.random.Generator, rows: int, features: int) -> pa.RecordBatch:
    numeric = rng.standard_normal((rows, features - 1))
    colour = rng.integers(0, len(CATEGORIES), rows)
    signal = numeric[:, 0] + numeric[:, 1] * numeric[:, 2] + (colour % 3 == 0)
    label = np.where(signal + rng.normal(scale=0.5, size=rows) > 0.5, "yes", "no")
    arrays = [pa.array(numeric[:, j]) for j in range(features - 1)]
    arrays.append(pa.array(np.asarray(CATEGORIES)[colour]).dictionary_encode().cast(pa.string()))
    arrays.append(pa.array(label))
    names = [f"x{j}" for j in range(features - 1)] + ["colour", "label"]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def write_table(root: Path, rows: int, features: int) -> dict[str, Any]:
    """The table as parts in a local store under ``root``; what a child needs to read it."""
    from service.datasets.parts import PartWriter
    from service.datasets.service import part_records
    from service.store import DataStore

    store = DataStore(str(root / "store"))
    rng = np.random.default_rng(0)
    first = _batch(rng, 1, features)
    writer = PartWriter(store, "bench", first.schema)
    for start in range(0, rows, 1 << 17):
        writer.write(_batch(rng, min(1 << 17, rows - start), features))
    parts = part_records("bench", writer.finish())
    kinds = {name: "numeric" for name in first.schema.names[:-2]}
    kinds.update(colour="categorical", label="categorical")
    return {
        "store": str(root / "store"),
        "rows": rows,
        "kinds": kinds,
        "parts": [
            {k: getattr(p, k) for k in ("part", "row_offset", "n_rows", "path", "size", "sha256")}
            for p in parts
        ],
    }


# The steps of a fit from parts (service.training.run and the engine), innermost first: where
# --phases charges each RSS sample.
PHASES = (
    "first_pass",
    "holdout_split",
    "gather",
    "bin",
    "grow_whole",
    "grow",
    "build_newton_trees",
    "build_trees",
    "_evaluate",
    "_fit",
    "training_baseline",
    "learning_curves",
    "impurity_importances",
    "run_training",
)


def child(path: str, how: str, method: str, phases: bool = False) -> None:
    """One fit in this process; prints its figures as one JSON line."""
    import hashlib

    from service.datasets.columns import CategoricalColumn, NumericColumn
    from service.datasets.part_reader import open_part, read_columns
    from service.db.tables import DatasetPartRecord
    from service.store import DataStore
    from service.training import run_training
    from service.training.part_table import PartTable, give_back_read_buffers

    table_info = json.loads(Path(path).read_text())
    features = [name for name in table_info["kinds"] if name != "label"]
    spec = _spec(method, features)
    # The baseline: the same fit on a few rows in memory (imports, compiled kernels).
    rng = np.random.default_rng(1)
    warm: dict[str, Any] = {
        name: NumericColumn(name, rng.standard_normal(WARM_ROWS)) for name in features[:-1]
    }
    warm["colour"] = CategoricalColumn(
        "colour", rng.integers(0, 8, WARM_ROWS).astype(np.int32), tuple(CATEGORIES)
    )
    warm["label"] = CategoricalColumn(
        "label", rng.integers(0, 2, WARM_ROWS).astype(np.int32), ("no", "yes")
    )
    run_training(spec, warm, lambda f, s: None, lambda: False)
    del warm
    store = DataStore(table_info["store"])
    parts = [DatasetPartRecord(dataset_id="bench", **p) for p in table_info["parts"]]
    # pyarrow's Parquet reader and memory pool, once: every read below goes through them.
    open_part(store, parts[-1]).read_row_group(0)
    # That read's part buffer (62 MiB of the last part) is sometimes still held here and
    # freed inside the fit, which then seemed to grow by that much less: freed first, with
    # whatever the warm-up left to the allocators, so the baseline is the same every run.
    gc.collect()
    give_back_read_buffers()
    Path("/proc/self/clear_refs").write_text("5")
    baseline = status_bytes("VmRSS")
    started, cpu = time.monotonic(), time.process_time()

    sampler = PhaseSampler(PHASES if phases else ())
    with sampler if phases else contextlib.nullcontext():
        table = PartTable(store, parts, table_info["kinds"], table_info["rows"])
        if how == "parts":
            columns: Any = table
        else:
            pairs = [(name, table_info["kinds"][name]) for name in [*features, "label"]]
            columns = read_columns(store, parts, pairs, table_info["rows"])
        outcome = run_training(spec, columns, lambda f, s: None, lambda: False)
    print(
        json.dumps(
            {
                "how": how,
                "baseline": baseline,
                "peak": status_bytes("VmHWM"),
                "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "wall": time.monotonic() - started,
                "cpu": time.process_time() - cpu,
                "sha256": hashlib.sha256(outcome.artifact).hexdigest(),
                "parts_read": table.parts_read,
                "phases": [
                    [name, low - baseline, high - baseline] for name, low, high in sampler.rows
                ],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument(
        "--method", default="xgboost", choices=["xgboost", "gradient_boosting", "random_forest"]
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also print the RSS growth in each step of the fit from parts (a sampling thread)",
    )
    parser.add_argument("--child", nargs=2, metavar=("TABLE_JSON", "HOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.method, args.phases)
        return
    with tempfile.TemporaryDirectory(prefix="coppice-fit-memory-") as tmp:
        root = Path(tmp)
        started = time.monotonic()
        info = write_table(root, args.rows, args.features)
        (root / "table.json").write_text(json.dumps(info))
        print(
            f"{args.rows:,} rows x {args.features} features in {len(info['parts'])} parts, "
            f"written in {time.monotonic() - started:.0f} s; load {os.getloadavg()}"
        )
        results = {}
        for how in ("parts", "memory"):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.fit_memory",
                    "--method",
                    args.method,
                    "--child",
                    str(root / "table.json"),
                    how,
                    *(["--phases"] if args.phases and how == "parts" else []),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[how] = json.loads(out.strip().splitlines()[-1])
    n_train = round(args.rows * 0.8)
    binned = args.rows * args.features  # the training rows' codes plus the validation rows'
    largest = max(info["parts"], key=lambda p: p["n_rows"])
    part_floats = largest["n_rows"] * args.features * 8
    mib = 2**20
    print(f"load average after: {os.getloadavg()}")
    print(
        f"binned matrix (all {args.rows:,} rows, {n_train:,} of them training): {binned / mib:.0f}"
        f" MiB; one part: {largest['size'] / mib:.0f} MiB stored, {part_floats / mib:.0f} MiB of"
        f" float64 features; float table: {args.rows * args.features * 8 / mib:.0f} MiB"
    )
    for how, r in results.items():
        growth = r["peak"] - r["baseline"]
        print(
            f"{how:>6}: baseline {r['baseline'] / mib:.0f} MiB, peak {r['peak'] / mib:.0f} MiB, "
            f"growth {growth / mib:.0f} MiB; wall {r['wall']:.1f} s, CPU {r['cpu']:.1f} s; "
            f"sha256 {r['sha256'][:12]}"
        )
    if args.phases:
        print("parts, by step (RSS growth, lowest to highest, MiB; steps that grew it):")
        highest = 0
        for name, low, high in results["parts"]["phases"]:
            # A step that takes the RSS to a new height, or moves it by more than noise:
            # the rounds' steady steps after the first tree are left out.
            if high > highest + 2 * mib or high - low >= 2 * mib:
                print(f"  {name:>22}: {low / mib:4.0f} .. {high / mib:4.0f}")
            highest = max(highest, high)
    growth = results["parts"]["peak"] - results["parts"]["baseline"]
    bound = binned + largest["size"] + part_floats / largest["n_rows"] * (1 << 17)
    print(
        f"parts growth / (binned + one part's bytes + one row group's floats) = "
        f"{growth / bound:.2f}; memory growth / parts growth = "
        f"{(results['memory']['peak'] - results['memory']['baseline']) / max(growth, 1):.1f}x; "
        f"same model: {results['parts']['sha256'] == results['memory']['sha256']}"
    )


if __name__ == "__main__":
    main()
